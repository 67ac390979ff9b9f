//! The proof a caller may change the plant. It lives apart from [`super::Plant`] so that the
//! object model and the historian can ask for it without importing the plant they serve.

/// The proof a caller may change the plant; only the plant module makes one.
#[derive(Debug)]
pub struct WriteCapability(());

/// The one capability, held by every [`super::Plant`].
pub(super) static WRITE: WriteCapability = WriteCapability(());
