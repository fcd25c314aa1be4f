//! Joining a DWARF-unwound user stack that stopped at the end of the copied stack with
//! the kernel's frame-pointer chain, which walked the whole stack but skipped or lost
//! frames where code keeps no frame pointer.

/// Continues `unwound` (innermost first, `unwound[0]` the instruction pointer) with the
/// frame-pointer chain `fp` (same convention), after the deepest frame both have.
///
/// The frame-pointer chain only ever *skips* frames that DWARF finds (a leaf that pushes
/// no frame hides its caller's return address) or goes astray where rbp is a general
/// register — and then it has nothing in common with the DWARF frames past the
/// instruction pointer. So where the two share a frame, what the FP chain has beyond it
/// is the continuation; the deepest shared frame is the one to continue from. A frame
/// repeated by recursion is matched by its occurrence count, so that the continuation
/// does not restart the recursion. With no shared frame at all (not even the
/// instruction pointer), the FP chain is of another stack and nothing is appended.
///
/// Returns whether anything was appended.
pub(crate) fn splice_fp_chain(unwound: &mut Vec<u64>, fp: &[u64]) -> bool {
    for (depth, &addr) in unwound.iter().enumerate().rev() {
        let occurrence = unwound[..=depth].iter().filter(|&&a| a == addr).count();
        let Some(at) = fp
            .iter()
            .enumerate()
            .filter(|&(_, &a)| a == addr)
            .map(|(i, _)| i)
            .nth(occurrence - 1)
        else {
            continue;
        };
        let rest = &fp[at + 1..];
        let appended = !rest.is_empty();
        unwound.extend_from_slice(rest);
        return appended;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spliced(unwound: &[u64], fp: &[u64]) -> Vec<u64> {
        let mut out = unwound.to_vec();
        splice_fp_chain(&mut out, fp);
        out
    }

    #[test]
    fn continues_after_the_last_shared_frame() {
        // ip, nanosleep's return into short_sleeper (FP skipped it), short_sleeper's into
        // main; the dump ended there; FP goes on to __libc_start_call_main.
        assert_eq!(spliced(&[1, 20, 30], &[1, 30, 40, 50]), [1, 20, 30, 40, 50]);
    }

    #[test]
    fn when_only_the_ip_is_shared_the_fp_chain_continues_from_it() {
        // The dump ended right after frames the FP chain skipped.
        assert_eq!(spliced(&[1, 20, 21], &[1, 40, 50]), [1, 20, 21, 40, 50]);
        // Nothing unwound past the ip: the FP chain as it is.
        assert_eq!(spliced(&[1], &[1, 40, 50]), [1, 40, 50]);
    }

    #[test]
    fn a_chain_with_nothing_in_common_is_not_appended() {
        let mut out = vec![1, 20, 30];
        assert!(!splice_fp_chain(&mut out, &[2, 99]));
        assert_eq!(out, [1, 20, 30]);
        assert!(!splice_fp_chain(&mut out, &[]));
        // Shared but nothing beyond it.
        assert!(!splice_fp_chain(&mut out, &[1, 30]));
        assert_eq!(out, [1, 20, 30]);
    }

    #[test]
    fn recursion_continues_from_the_matching_occurrence() {
        // f recursed three times (return address 7); DWARF saw two of them.
        assert_eq!(spliced(&[1, 7, 7], &[1, 7, 7, 7, 8, 9]), [1, 7, 7, 7, 8, 9]);
    }
}
