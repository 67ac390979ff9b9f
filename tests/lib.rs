//! Test support shared beyond the integration tests: the hostile clients the abuse test, the
//! soak and the benchmark all turn loose on a server.

pub mod hostile;
