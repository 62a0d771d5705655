//! Server (placeholder).
