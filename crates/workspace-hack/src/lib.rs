//! Feature unification for the product's third-party crates, kept by `cargo hakari` (see
//! `.config/hakari.toml`): every product crate depends on it, so building any one of them
//! alone selects the same features as building them all. It has no code.
