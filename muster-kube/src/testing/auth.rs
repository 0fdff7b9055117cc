//! Authentication (bearer tokens), impersonation and RBAC-style authorization, and the logs
//! of requests and accepted writes.
//!
//! - A bearer token maps to a user and its groups; every authenticated user is also in
//!   `system:authenticated`. No token, or an unknown one, is answered 401.
//! - Until the first rule is added (or [`enforce_rbac`](super::ApiServerDouble::enforce_rbac)),
//!   every authenticated user may do everything. After that, a request needs a rule that
//!   matches its user or one of its groups, verb, API group, resource (`mcpservers/status` is
//!   its own resource; `*` and `*/status` as in RBAC) and namespace (a rule without a
//!   namespace is cluster-wide, as a ClusterRoleBinding). Members of `system:masters` may
//!   always do everything.
//! - `Impersonate-User` / `Impersonate-Group` / `Impersonate-Uid` headers need the
//!   `impersonate` verb on `users` (`serviceaccounts` in the account's namespace for
//!   `system:serviceaccount:<ns>:<name>`), `groups` and `uids` in the core group; the request
//!   is then authorized as the impersonated user, who is in the named groups and
//!   `system:authenticated`.

use std::collections::HashMap;

use http::HeaderMap;

use super::status::ApiError;

/// An authenticated user: a name and groups.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserInfo {
    /// The user name (`system:serviceaccount:muster:muster`, `alice`).
    pub name: String,
    /// Its groups, `system:authenticated` included.
    pub groups: Vec<String>,
}

/// One write the double accepted, in the order it accepted them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditEntry {
    /// The user the write was authorized as (the impersonated user when impersonating).
    pub user: String,
    /// The user who sent the request while impersonating `user`.
    pub impersonated_by: Option<String>,
    /// `create`, `update`, `patch`, `delete` or `deletecollection`.
    pub verb: String,
    /// The API group (empty for core).
    pub group: String,
    /// The resource (plural).
    pub resource: String,
    /// `Some("status")` for writes to the status subresource.
    pub subresource: Option<String>,
    /// The namespace, for namespaced resources.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

/// One HTTP request the double answered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestRecord {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The URL path.
    pub path: String,
    /// The raw query string, if any.
    pub query: Option<String>,
    /// The authenticated user (who sent it), when authentication succeeded.
    pub user: Option<String>,
    /// The user it impersonated, if any.
    pub impersonated_user: Option<String>,
    /// The HTTP status code answered (`200` for a watch that started).
    pub status: u16,
}

/// What a request asks to do, for authorization.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attributes<'a> {
    pub(crate) verb: &'a str,
    pub(crate) group: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) subresource: Option<&'a str>,
    pub(crate) namespace: Option<&'a str>,
    /// Empty for create, list and watch (authorization comes before the body is read).
    pub(crate) name: &'a str,
}

#[derive(Debug, Clone)]
struct Rule {
    subject: String,
    verbs: Vec<String>,
    group: String,
    resource: String,
    namespace: Option<String>,
}

impl Rule {
    fn matches(&self, user: &UserInfo, attrs: &Attributes<'_>) -> bool {
        let subject = self.subject == user.name || user.groups.contains(&self.subject);
        let verb = self.verbs.iter().any(|v| v == "*" || v == attrs.verb);
        let group = self.group == "*" || self.group == attrs.group;
        let resource = match attrs.subresource {
            None => self.resource == "*" || self.resource == attrs.resource,
            Some(sub) => {
                self.resource == "*"
                    || self.resource == format!("{}/{sub}", attrs.resource)
                    || self.resource == format!("*/{sub}")
            }
        };
        let namespace = match (&self.namespace, attrs.namespace) {
            (None, _) => true,
            (Some(rule), Some(asked)) => rule == asked,
            (Some(_), None) => false,
        };
        subject && verb && group && resource && namespace
    }
}

/// Tokens, rules and the logs.
#[derive(Debug, Default)]
pub(crate) struct Auth {
    tokens: HashMap<String, UserInfo>,
    rules: Vec<Rule>,
    enforce: bool,
    pub(crate) requests: Vec<RequestRecord>,
    pub(crate) audit: Vec<AuditEntry>,
}

impl Auth {
    pub(crate) fn add_token(&mut self, token: &str, user: &str, groups: &[&str]) {
        let mut groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".to_owned());
        }
        self.tokens.insert(
            token.to_owned(),
            UserInfo {
                name: user.to_owned(),
                groups,
            },
        );
    }

    pub(crate) fn allow(
        &mut self,
        subject: &str,
        verbs: &[&str],
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) {
        self.enforce = true;
        self.rules.push(Rule {
            subject: subject.to_owned(),
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            group: group.to_owned(),
            resource: resource.to_owned(),
            namespace: namespace.map(str::to_owned),
        });
    }

    pub(crate) fn enforce(&mut self) {
        self.enforce = true;
    }

    /// The user behind `Authorization: Bearer <token>`.
    pub(crate) fn authenticate(&self, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
        let token = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        token
            .and_then(|t| self.tokens.get(t))
            .cloned()
            .ok_or_else(ApiError::unauthorized)
    }

    fn permits(&self, user: &UserInfo, attrs: &Attributes<'_>) -> bool {
        !self.enforce
            || user.groups.iter().any(|g| g == "system:masters")
            || self.rules.iter().any(|r| r.matches(user, attrs))
    }

    /// Allows the request or answers 403 worded as the RBAC authorizer words it.
    pub(crate) fn authorize(&self, user: &UserInfo, attrs: &Attributes<'_>) -> Result<(), ApiError> {
        if self.permits(user, attrs) {
            return Ok(());
        }
        let resource = match attrs.subresource {
            Some(sub) => format!("{}/{sub}", attrs.resource),
            None => attrs.resource.to_owned(),
        };
        let scope = match attrs.namespace {
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".to_owned(),
        };
        let why = format!(
            "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
            user.name, attrs.verb, attrs.group
        );
        Err(ApiError::forbidden(attrs.group, attrs.resource, attrs.name, &why))
    }

    /// The impersonated user, when the request asks for one and `requester` may.
    pub(crate) fn impersonate(&self, requester: &UserInfo, headers: &HeaderMap) -> Result<Option<UserInfo>, ApiError> {
        let values = |name: &str| -> Vec<String> {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_owned)
                .collect()
        };
        let users = values("impersonate-user");
        let groups = values("impersonate-group");
        let uids = values("impersonate-uid");
        let Some(user) = users.first() else {
            if groups.is_empty() && uids.is_empty() {
                return Ok(None);
            }
            return Err(ApiError::internal(
                "requested [group and uid impersonation] without impersonating a user",
            ));
        };
        let check = |resource: &str, namespace: Option<&str>, name: &str| {
            self.authorize(
                requester,
                &Attributes {
                    verb: "impersonate",
                    group: "",
                    resource,
                    subresource: None,
                    namespace,
                    name,
                },
            )
        };
        let mut impersonated_groups = groups.clone();
        match user
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
        {
            Some((namespace, name)) => {
                check("serviceaccounts", Some(namespace), name)?;
                impersonated_groups.push("system:serviceaccounts".to_owned());
                impersonated_groups.push(format!("system:serviceaccounts:{namespace}"));
            }
            None => check("users", None, user)?,
        }
        for group in &groups {
            check("groups", None, group)?;
        }
        for uid in &uids {
            check("uids", None, uid)?;
        }
        impersonated_groups.push("system:authenticated".to_owned());
        Ok(Some(UserInfo {
            name: user.clone(),
            groups: impersonated_groups,
        }))
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn create(namespace: &str) -> Attributes<'_> {
        Attributes {
            verb: "create",
            group: "muster.giantswarm.io",
            resource: "mcpservers",
            subresource: None,
            namespace: Some(namespace),
            name: "",
        }
    }

    #[test]
    fn without_rules_every_authenticated_user_may_act() {
        let mut auth = Auth::default();
        auth.add_token("t", "bob", &[]);
        let user = auth.authenticate(&bearer("t")).expect("known token");
        assert!(auth.authorize(&user, &create("default")).is_ok());
        assert_eq!(auth.authenticate(&bearer("nope")).expect_err("unknown").code, 401);
    }

    #[test]
    fn namespaced_rules_hold_only_in_their_namespace_and_status_is_separate() {
        let mut auth = Auth::default();
        auth.add_token("t", "bob", &["team"]);
        auth.allow(
            "team",
            &["create", "get"],
            "muster.giantswarm.io",
            "mcpservers",
            Some("a"),
        );
        let user = auth.authenticate(&bearer("t")).expect("known token");
        assert!(auth.authorize(&user, &create("a")).is_ok());
        let err = auth.authorize(&user, &create("b")).expect_err("other namespace");
        assert_eq!(
            err.message,
            "mcpservers.muster.giantswarm.io is forbidden: User \"bob\" cannot create resource \"mcpservers\" in API group \"muster.giantswarm.io\" in the namespace \"b\""
        );
        let status = Attributes {
            verb: "get",
            subresource: Some("status"),
            name: "x",
            ..create("a")
        };
        let err = auth.authorize(&user, &status).expect_err("status is its own resource");
        assert!(
            err.message.contains("cannot get resource \"mcpservers/status\""),
            "{}",
            err.message
        );
    }

    #[test]
    fn impersonating_needs_the_impersonate_verb() {
        let mut auth = Auth::default();
        auth.add_token("sa", "system:serviceaccount:muster:gw", &[]);
        auth.enforce();
        let sa = auth.authenticate(&bearer("sa")).expect("known");
        let mut headers = bearer("sa");
        headers.insert("impersonate-user", HeaderValue::from_static("alice"));
        let err = auth.impersonate(&sa, &headers).expect_err("no right");
        assert_eq!(
            err.message,
            "users \"alice\" is forbidden: User \"system:serviceaccount:muster:gw\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        );
        auth.allow(&sa.name, &["impersonate"], "", "users", None);
        let alice = auth
            .impersonate(&sa, &headers)
            .expect("allowed")
            .expect("impersonating");
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.groups, ["system:authenticated"]);
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let value = HeaderValue::from_str(&format!("Bearer {token}")).expect("ascii");
        headers.insert(http::header::AUTHORIZATION, value);
        headers
    }
}
