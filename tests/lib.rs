//! The integration tests live in `it/`; this library is empty.
