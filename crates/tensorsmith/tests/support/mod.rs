pub mod http_server;
