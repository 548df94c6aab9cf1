use mesh_egress::block::Block;
use mesh_egress::channel::{Deliver, Recorder};
use mesh_egress::gate::QualityGate;
use mesh_egress::{Attribution, Turn};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    let channel = Recorder::new();
    let block = Block::new("All *green*.\n\n", turn.attribution().clone(), 0);
    let checked = QualityGate::off()
        .check_block(&turn, "status?", "", block)
        .await
        .expect("an off gate passes the block");
    channel.deliver(checked).await.expect("delivered");
    assert_eq!(channel.sent(), ["All green."]);
}
