//! Generations under a state root (filled in by stage 3).

/// Why a generation could not be materialised or verified.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerationError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

impl GenerationError {
    pub fn is_io(&self) -> bool {
        matches!(self, GenerationError::Io { .. })
    }
}
