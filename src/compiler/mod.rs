//! The Context Compiler: a pure function of the runtime state, in every released version.
//!
//! A manifest records the `compilerVersion` that derived it, and admission and replay
//! re-derive it to prove it. So every released compiler stays in the binary, in the
//! [`Registry`] [`RELEASED`] keyed by `compilerVersion` (as a workflow engine keeps every
//! workflow version replayable): an Attempt start is re-derived by the compiler its
//! manifest names ([`for_version`]), a version this build lacks is refused by name, and a
//! new Attempt is compiled by the newest ([`compile`], [`newest`]).
//!
//! Each version lives in its own frozen module (`v1.rs` … `v8.rs`); a change to
//! what the compiler selects, orders, budgets or renders is a new module registered as the
//! newest, never a change of a released one's output (compilers 3 to 5 reuse compiler/2's
//! stages through `v2::pipeline`, whose compiler/2 output the golden packages pin). No clock, randomness, environment or I/O in any of them.
//! Each version also renders its own packages as Markdown ([`Compiler::markdown`]).

mod render;
pub mod v1;
pub mod v2;
pub mod v3;
pub mod v4;
pub mod v5;
pub mod v6;
pub mod v7;
pub mod v8;

use std::fmt;

use ledger_schema::manifest::ContextManifest;
use ledger_schema::package::ContextPackage;
use ledger_schema::types::{InputClass, Phase};
use ledger_schema::{Digest, Id};

use crate::runtime::AttemptBinding;
use crate::runtime::state::State;

/// Compiler/1's Markdown rendering of a package (Rust `Debug` names for enum values);
/// [`Compiled::markdown`] renders with the compiler that derived the package.
pub use render::markdown;
pub use v2::DEFAULT_CLASS_BUDGET_BYTES;

/// The newest compiler's version: what a new Attempt's manifest records.
pub const COMPILER_VERSION: &str = v8::VERSION;

/// Every released compiler, newest first: what this build can re-derive. Adding a
/// version means adding its module and putting it here as `newest`, the previous newest
/// first among `older`.
pub static RELEASED: Registry<'static> =
    Registry::new(&v8::V8, &[&v7::V7, &v6::V6, &v5::V5, &v4::V4, &v3::V3, &v2::V2, &v1::V1]);

/// One released compiler version.
pub trait Compiler: Sync {
    /// The `compilerVersion` it records in every manifest it derives.
    fn version(&self) -> &'static str;
    /// Compiles the Context Package and Manifest for one Attempt start. Pure.
    fn compile(&self, state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError>;
    /// The worker-facing Markdown rendering of a package this compiler derived. The
    /// default is compiler/1's rendering (`render.rs`, frozen with `v1.rs`, which therefore
    /// needs no override); every later compiler overrides it with its own.
    fn markdown(&self, package: &ContextPackage) -> String {
        render::markdown(package)
    }
}

/// Compilers keyed by `compilerVersion`: one newest (new Attempts) and the older ones
/// (still re-derivable). The binary uses [`RELEASED`]; tests may build their own.
#[derive(Clone, Copy)]
pub struct Registry<'a> {
    newest: &'a dyn Compiler,
    older: &'a [&'a dyn Compiler],
}

impl<'a> Registry<'a> {
    /// A registry of `newest` and the `older` compilers (newest first). A version listed
    /// twice resolves to its first (newest) occurrence.
    pub const fn new(newest: &'a dyn Compiler, older: &'a [&'a dyn Compiler]) -> Registry<'a> {
        Registry { newest, older }
    }

    /// The compiler new Attempts start on.
    pub fn newest(&self) -> &'a dyn Compiler {
        self.newest
    }

    /// The compiler that records `version`, if this registry has it.
    pub fn for_version(&self, version: &str) -> Option<&'a dyn Compiler> {
        self.iter().find(|c| c.version() == version)
    }

    /// Where `version` stands, newest first (0: the newest), if this registry has it.
    pub fn rank(&self, version: &str) -> Option<usize> {
        self.iter().position(|c| c.version() == version)
    }

    /// Every version, newest first.
    pub fn versions(&self) -> Vec<&'static str> {
        self.iter().map(|c| c.version()).collect()
    }

    fn iter(&self) -> impl Iterator<Item = &'a dyn Compiler> + 'a {
        std::iter::once(self.newest).chain(self.older.iter().copied())
    }
}

impl fmt::Debug for Registry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.versions()).finish()
    }
}

/// The released compiler that records `version`.
pub fn for_version(version: &str) -> Option<&'static dyn Compiler> {
    RELEASED.for_version(version)
}

/// The newest released compiler.
pub fn newest() -> &'static dyn Compiler {
    RELEASED.newest()
}

/// Compiles with the newest released compiler: what a new Attempt's manifest records.
pub fn compile(state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
    newest().compile(state, binding)
}

/// What one compilation produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    pub package: ContextPackage,
    /// The canonical package bytes: the exact dispatch payload.
    pub package_bytes: Vec<u8>,
    pub manifest: ContextManifest,
}

impl Compiled {
    /// The manifest's digest, computed when asked: a currency proof compares package
    /// digests only, and hashing the manifest was a third of a compile.
    pub fn manifest_digest(&self) -> Digest {
        self.manifest.digest()
    }

    /// The worker-facing Markdown rendering of the package, by the released compiler its
    /// manifest names (each version keeps its own rendering). A package of a compiler
    /// this build does not release (a test registry's) gets the trait's default rendering.
    pub fn markdown(&self) -> String {
        match for_version(&self.manifest.compiler_version) {
            Some(compiler) => compiler.markdown(&self.package),
            None => markdown(&self.package),
        }
    }
}

/// Why a context could not be compiled. The worker is not dispatched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    #[error("unknown {what} {id}")]
    Unknown { what: &'static str, id: Id },
    #[error("the policy has no phase policy for {}", crate::runtime::wire(.0))]
    NoPhasePolicy(Phase),
    #[error(
        "required {} content of {bytes} bytes does not fit its budget of {budget} bytes: split the task",
        crate::runtime::wire(.class)
    )]
    RequiredOverflow { class: InputClass, bytes: usize, budget: u32 },
    #[error("the repair context cannot be proved: {0}")]
    Repair(String),
    /// The task selection the Attempt names cannot be carried (any more).
    #[error("{0}")]
    Selection(#[from] crate::runtime::selection::AttemptSelectionError),
    /// A repair child's prior-attempt feedback loses items to the policy's feedback limits
    /// while the phase policy requires the WORKING class that carries it (compiler/4).
    #[error(
        "required WORKING content: {lost} prior-attempt feedback item(s) do not fit the policy's feedback limits: raise them or split the task"
    )]
    RequiredFeedback { lost: usize },
    #[error("{version} carries no task selection (compiler/3 and later do)")]
    SelectionUnsupported { version: &'static str },
}
