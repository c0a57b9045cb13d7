//! `drydock`: the operator CLI. The commands are in `drydock::commands`;
//! here a failure becomes its exit code, in one place (`drydock::exit`).
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser as _;
use drydock::args::Cli;
use drydock::{exit, text};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    drydock::term::init_color(cli.color);
    match drydock::commands::run(cli).await {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("drydock: {}", text::safe_lines(&format!("{e:#}")));
            ExitCode::from(exit::USAGE)
        }
    }
}
