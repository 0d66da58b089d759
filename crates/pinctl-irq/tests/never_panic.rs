//! Whatever irqbalance answers or a driver names its vectors, the parsers answer with a value
//! or an error, never a panic.

use proptest::prelude::*;

proptest! {
    #[test]
    fn setup_answers_and_queue_names(text in "\\PC{0,300}", n in any::<u32>(), mask in "[0-9a-f,]{0,80}") {
        let _ = pinctl_irq::irqbalance::parse_setup(&text);
        let _ = pinctl_irq::irqbalance::parse_setup(&format!("SLEEP {n} IRQ {n} LOAD 1 DIFF 2 CLASS 3 BANNED {mask}"));
        let _ = pinctl_irq::decide::queue_of(&text);
        let _ = pinctl_irq::decide::queue_of(&format!("eth0-TxRx-{text}"));
    }
}
