//! Whether an executor serves: its gRPC health service, which audits no
//! successful probe (the agent probes every host every few seconds).

use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

use super::ExecutorError;

/// The service name the executor registers with its health reporter.
const SERVICE: &str = "drydock.executor.v1.Executor";

pub(super) async fn ping(channel: Channel) -> Result<(), ExecutorError> {
    let answer = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: SERVICE.into(),
        })
        .await?
        .into_inner();
    if answer.status == ServingStatus::Serving as i32 {
        Ok(())
    } else {
        Err(ExecutorError::new(
            tonic::Code::Unavailable,
            "the executor is not serving",
        ))
    }
}
