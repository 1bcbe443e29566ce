pub mod http_server;
pub mod versioned_server;
pub mod faulty_server;
