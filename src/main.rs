#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    closure_ledger::cli::main()
}
