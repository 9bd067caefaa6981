//! placeholder
pub async fn remove_leftover_containers() {}
