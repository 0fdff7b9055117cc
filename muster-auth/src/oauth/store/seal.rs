//! [`Sealer`]: AES-256-GCM under a [`GrantStoreKey`], the one cipher of every place muster keeps
//! a secret at rest: the grant files of [`EncryptedGrantStore`](super::EncryptedGrantStore) and
//! the values of the Valkey sign-in state store.
//!
//! A sealed value is a [`Header`] (six magic bytes and a format version), a fresh random 96-bit
//! nonce, then the ciphertext and its 16-byte tag. The associated data is the header and what the
//! value is bound to (a grant file's id, a Valkey key's): a value moved under another name, or
//! given another header, does not open.

use std::{fmt, io};

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

use super::GrantStoreKey;

/// The AES-GCM tag after the ciphertext.
const TAG_LEN: usize = 16;

/// What a sealed value starts with: its kind (six bytes) and format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) magic: &'static [u8; 6],
    pub(crate) version: u8,
}

impl Header {
    pub(crate) const LEN: usize = 7;

    fn bytes(self) -> [u8; Self::LEN] {
        let mut bytes = [0u8; Self::LEN];
        bytes[..6].copy_from_slice(self.magic);
        bytes[6] = self.version;
        bytes
    }
}

/// Why a sealed value does not open. Says nothing of its contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenProblem {
    Truncated,
    NoHeader,
    UnknownVersion { got: u8, writes: u8 },
    DoesNotOpen,
}

impl fmt::Display for OpenProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => f.write_str("it is too short to be sealed (truncated?)"),
            Self::NoHeader => f.write_str("it does not start with the expected header"),
            Self::UnknownVersion { got, writes } => {
                write!(f, "its format version {got} is unknown (this muster writes {writes})")
            }
            Self::DoesNotOpen => {
                f.write_str("it does not decrypt: sealed with another key, corrupted, or moved from another name")
            }
        }
    }
}

/// Seals and opens values with one key. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Sealer {
    key: std::sync::Arc<LessSafeKey>,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sealer([redacted])")
    }
}

impl Sealer {
    pub(crate) fn new(key: &GrantStoreKey) -> Self {
        let key = UnboundKey::new(&AES_256_GCM, &key.0).expect("a GrantStoreKey has the AES-256 key length");
        Self {
            key: std::sync::Arc::new(LessSafeKey::new(key)),
        }
    }

    /// `header`, a fresh nonce, then `plaintext` sealed with the header and `bound_to` as
    /// associated data. Fails only when the random source does.
    pub(crate) fn seal(&self, header: Header, bound_to: &[u8], mut plaintext: Vec<u8>) -> io::Result<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(io::Error::other)?;
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(associated_data(header, bound_to)),
                &mut plaintext,
            )
            .map_err(|_| io::Error::other("AES-256-GCM sealing failed"))?;
        let mut sealed = Vec::with_capacity(Header::LEN + NONCE_LEN + plaintext.len());
        sealed.extend_from_slice(&header.bytes());
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&plaintext);
        Ok(sealed)
    }

    /// The plaintext of `sealed` (decrypted in place), sealed with `header` and `bound_to`.
    pub(crate) fn open<'a>(
        &self,
        header: Header,
        bound_to: &[u8],
        sealed: &'a mut [u8],
    ) -> Result<&'a [u8], OpenProblem> {
        if sealed.len() < Header::LEN + NONCE_LEN + TAG_LEN {
            return Err(OpenProblem::Truncated);
        }
        let (head, rest) = sealed.split_at_mut(Header::LEN);
        if head[..6] != header.magic[..] {
            return Err(OpenProblem::NoHeader);
        }
        if head[6] != header.version {
            return Err(OpenProblem::UnknownVersion {
                got: head[6],
                writes: header.version,
            });
        }
        let (nonce, ciphertext) = rest.split_at_mut(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| OpenProblem::Truncated)?;
        self.key
            .open_in_place(nonce, Aad::from(associated_data(header, bound_to)), ciphertext)
            .map(|plaintext| &*plaintext)
            .map_err(|_| OpenProblem::DoesNotOpen)
    }
}

fn associated_data(header: Header, bound_to: &[u8]) -> Vec<u8> {
    let mut aad = Vec::with_capacity(Header::LEN + bound_to.len());
    aad.extend_from_slice(&header.bytes());
    aad.extend_from_slice(bound_to);
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: Header = Header {
        magic: b"MTEST0",
        version: 1,
    };

    #[test]
    fn a_value_opens_only_with_its_key_header_and_binding() {
        let key = GrantStoreKey::generate();
        let sealer = Sealer::new(&key);
        let sealed = sealer.seal(HEADER, b"here", b"secret".to_vec()).expect("seals");
        assert!(
            !sealed.windows(6).any(|w| w == b"secret"),
            "no plaintext in the sealed value"
        );
        assert_eq!(sealer.open(HEADER, b"here", &mut sealed.clone()), Ok(&b"secret"[..]));
        assert_eq!(
            sealer.open(HEADER, b"there", &mut sealed.clone()),
            Err(OpenProblem::DoesNotOpen)
        );
        let other = Sealer::new(&GrantStoreKey::generate());
        assert_eq!(
            other.open(HEADER, b"here", &mut sealed.clone()),
            Err(OpenProblem::DoesNotOpen)
        );
        let newer = Header { version: 2, ..HEADER };
        assert_eq!(
            sealer.open(newer, b"here", &mut sealed.clone()),
            Err(OpenProblem::UnknownVersion { got: 1, writes: 2 })
        );
        let another = Header {
            magic: b"MOTHER",
            ..HEADER
        };
        assert_eq!(
            sealer.open(another, b"here", &mut sealed.clone()),
            Err(OpenProblem::NoHeader)
        );
        assert_eq!(
            sealer.open(HEADER, b"here", &mut sealed[..20].to_vec()),
            Err(OpenProblem::Truncated)
        );
    }
}
