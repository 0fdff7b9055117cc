//! Load-time checks on the parse tree: every called function exists (Go's text/template refuses
//! an undefined function at parse time; gotmpl only at execution), and whether the template is
//! one value action (which then renders typed).

use gotmpl::parse::{BranchNode, Expr, ListNode, Node, Parser, PipeNode};

use super::{TemplateError, sprig::SPRIG_FUNCTIONS, typed::CAPTURE};

/// gotmpl's built-in functions (text/template's).
pub(crate) const GO_BUILTINS: &[&str] = &[
    "and", "call", "eq", "ge", "gt", "html", "index", "js", "le", "len", "lt", "ne", "not", "or", "print", "printf",
    "println", "slice", "urlquery",
];

/// What the parse tree says about a template.
#[derive(Debug)]
pub(crate) struct Analysis {
    /// Apart from surrounding whitespace, the template is exactly one action without a
    /// variable declaration.
    pub(crate) single_action: bool,
}

/// Parses `source` and checks its function calls.
pub(crate) fn analyse(name: &str, source: &str) -> Result<Analysis, TemplateError> {
    let parse_error = |source| TemplateError::Parse {
        template: name.to_owned(),
        source,
    };
    let (root, defines) = Parser::with_name(Some(name), source, "{{", "}}")
        .and_then(Parser::parse)
        .map_err(parse_error)?;
    let mut undefined = None;
    list(&root, &mut undefined);
    for define in &defines {
        list(&define.body, &mut undefined);
    }
    if let Some(function) = undefined {
        return Err(TemplateError::UndefinedFunction {
            template: name.to_owned(),
            function,
        });
    }
    let mut significant = root.nodes.iter().filter(|node| match node {
        Node::Text(text) => !text.text.trim().is_empty(),
        _ => true,
    });
    let single_action = defines.is_empty()
        && matches!(
            (significant.next(), significant.next()),
            (Some(Node::Action(action)), None) if action.pipe.decl.is_empty()
        );
    Ok(Analysis { single_action })
}

fn is_known(function: &str) -> bool {
    function == CAPTURE || GO_BUILTINS.contains(&function) || SPRIG_FUNCTIONS.contains(&function)
}

fn list(list_node: &ListNode, undefined: &mut Option<String>) {
    for node in &list_node.nodes {
        match node {
            Node::List(inner) => list(inner, undefined),
            Node::Action(action) => pipe(&action.pipe, undefined),
            Node::If(branch) | Node::Range(branch) | Node::With(branch) => {
                self::branch(branch, undefined);
            }
            Node::Template(template) => {
                if let Some(p) = &template.pipe {
                    pipe(p, undefined);
                }
            }
            Node::Define(define) => list(&define.body, undefined),
            Node::Text(_) | Node::Break(_) | Node::Continue(_) => {}
        }
    }
}

fn branch(node: &BranchNode, undefined: &mut Option<String>) {
    pipe(&node.pipe, undefined);
    list(&node.body, undefined);
    if let Some(else_body) = &node.else_body {
        list(else_body, undefined);
    }
}

fn pipe(node: &PipeNode, undefined: &mut Option<String>) {
    for command in &node.commands {
        for arg in &command.args {
            expr(arg, undefined);
        }
    }
}

fn expr(node: &Expr, undefined: &mut Option<String>) {
    match node {
        Expr::Identifier(_, function) if !is_known(function) => {
            undefined.get_or_insert_with(|| function.to_string());
        }
        Expr::Pipe(_, inner) => pipe(inner, undefined),
        Expr::Chain(_, inner, _) => expr(inner, undefined),
        _ => {}
    }
}
