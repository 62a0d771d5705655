//! Client (placeholder).
