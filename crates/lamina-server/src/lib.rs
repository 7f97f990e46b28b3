//! lamina-server (in progress)
