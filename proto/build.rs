//! Compiles the executor contract. protoc comes from `protoc-bin-vendored` so
//! a fresh machine builds with cargo alone.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    std::env::set_var("PROTOC", protoc);
    println!("cargo:rerun-if-changed=proto/drydock/executor/v1/executor.proto");
    tonic_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_protos(&["proto/drydock/executor/v1/executor.proto"], &["proto"])?;
    Ok(())
}
