//! Runs the embedding example: `cargo run -p mcpgw-example-embedded`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), mcpgw_core::CoreError> {
    let (product, states) = mcpgw_example_embedded::run().await?;
    eprintln!(
        "6 x 7 = {product}; the server went through {}",
        states.join(" -> ")
    );
    Ok(())
}
