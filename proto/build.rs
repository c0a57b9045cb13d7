//! Compiles the executor contract. protoc comes from `protoc-bin-vendored` so
//! a fresh machine builds with cargo alone.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    println!("cargo:rerun-if-changed=proto/drydock/executor/v1/executor.proto");
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_with_config(
            config,
            &["proto/drydock/executor/v1/executor.proto"],
            &["proto"],
        )?;
    Ok(())
}
