//! Snapshots of the `powerlens dvfs` text views: a change in layout or in a figure shows
//! up here as a diff. Regenerate a snapshot with the command in its test's comment and
//! review the diff before committing it.

use powerlens_core::dvfs::breakeven::{break_even_table, HARDWARE_TIMEOUT_US};
use powerlens_core::dvfs::policy::Policy;
use powerlens_core::dvfs::profile::Profile;
use powerlens_core::dvfs::simulate::simulate_policies;
use powerlens_core::dvfs::trace::parse_trace;
use powerlens_core::dvfs::Level;
use powerlens_report::dvfs::{break_even_text, simulation_text};

#[test]
fn break_even_table_of_the_xeon() {
    // powerlens dvfs break-even --profile xeon-gold-6130
    let table = break_even_table(
        &Profile::builtin("xeon-gold-6130").unwrap(),
        HARDWARE_TIMEOUT_US,
    );
    assert_eq!(
        break_even_text(&table),
        include_str!("snapshots/dvfs-break-even-xeon-gold-6130.txt")
    );
}

#[test]
fn simulation_of_a_small_trace() {
    // printf '10,1\n100,0,1\n10,1\n' | powerlens dvfs simulate - --active-cores 10
    let trace = parse_trace(["10,1", "100,0,1", "10,1"]).unwrap();
    assert_eq!(trace[1].level, Level::Normal);
    let policies = [
        Policy::HARDWARE,
        Policy::FixedBreakEven,
        Policy::Hint,
        Policy::Oracle,
    ];
    let xeon = Profile::builtin("xeon-gold-6130").unwrap();
    let sim = simulate_policies(&xeon, 10, &trace, &policies).unwrap();
    assert_eq!(
        simulation_text(&sim),
        include_str!("snapshots/dvfs-simulate-hand.txt")
    );
}
