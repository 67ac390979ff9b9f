//! Present so that cargo counts the build dependencies `cargo hakari` lists here.

fn main() {}
