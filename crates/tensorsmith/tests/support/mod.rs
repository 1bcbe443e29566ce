pub mod faulty_server;
pub mod http_server;
pub mod versioned_server;
