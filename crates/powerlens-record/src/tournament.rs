//! A tournament tree of losers over k keys, for merging k sorted streams: the smallest key
//! in O(1), and after its stream advances, the new smallest in ⌈log2 k⌉ comparisons.
//!
//! Why not a binary heap: a recording's CPUs interleave closely (a ping-pong between two
//! CPUs alternates every one or two events), so the merge does a replace-the-smallest per
//! event, and a heap's pop and push cost two sifts where the tree replays one path.

/// Keys are `u64`s; a stream that has ended holds [`TournamentTree::DONE`]. Equal keys come
/// out lowest stream first.
pub struct TournamentTree {
    keys: Vec<u64>,
    /// `nodes[0]` is the overall winner (the stream with the smallest key); `nodes[n]` for
    /// n in 1..k the loser of the match played at internal node n. Leaf i sits at implicit
    /// position k + i; the parent of position p is p / 2.
    nodes: Vec<usize>,
}

impl TournamentTree {
    /// The key of a stream that has no more items: it loses every match.
    pub const DONE: u64 = u64::MAX;

    /// A tree over `keys` (one per stream, at least one).
    pub fn new(keys: Vec<u64>) -> Self {
        let k = keys.len();
        assert!(k > 0, "a tournament needs at least one stream");
        let mut tree = TournamentTree {
            keys,
            nodes: vec![0; k],
        };
        // Play every match bottom-up: winners[p] is the winner below position p.
        let mut winners = vec![0usize; 2 * k];
        for (i, w) in winners[k..].iter_mut().enumerate() {
            *w = i;
        }
        for n in (1..k).rev() {
            let (a, b) = (winners[2 * n], winners[2 * n + 1]);
            let (win, lose) = if tree.beats(a, b) { (a, b) } else { (b, a) };
            tree.nodes[n] = lose;
            winners[n] = win;
        }
        tree.nodes[0] = if k == 1 { 0 } else { winners[1] };
        tree
    }

    /// The stream with the smallest key.
    #[inline]
    pub fn winner(&self) -> usize {
        self.nodes[0]
    }

    /// The smallest key ([`TournamentTree::DONE`] when every stream has ended).
    #[inline]
    pub fn min_key(&self) -> u64 {
        self.keys[self.nodes[0]]
    }

    /// The winner's stream moved on to `key`: replays its path to the root.
    #[inline]
    pub fn replace_winner(&mut self, key: u64) {
        let k = self.keys.len();
        let mut winner = self.nodes[0];
        self.keys[winner] = key;
        let mut p = (winner + k) / 2;
        while p > 0 {
            let other = self.nodes[p];
            if self.beats(other, winner) {
                self.nodes[p] = winner;
                winner = other;
            }
            p /= 2;
        }
        self.nodes[0] = winner;
    }

    /// The head that comes out next after the winner's, as (key, stream): while the
    /// winner's stream has items before it, it can go on without a match being replayed.
    /// It lost to the winner on the winner's path to the root, so only that path's losers
    /// are looked at. With one stream: ([`TournamentTree::DONE`], `usize::MAX`).
    #[inline]
    pub fn runner_up(&self) -> (u64, usize) {
        let k = self.keys.len();
        let mut best = (Self::DONE, usize::MAX);
        let mut p = (self.nodes[0] + k) / 2;
        while p > 0 {
            let other = self.nodes[p];
            best = best.min((self.keys[other], other));
            p /= 2;
        }
        best
    }

    /// Whether stream `a` comes out before stream `b`.
    #[inline]
    fn beats(&self, a: usize, b: usize) -> bool {
        (self.keys[a], a) < (self.keys[b], b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merges sorted lists through the tree. In runs (as the replay merges), the winner's
    /// stream goes on while its items come before the [`TournamentTree::runner_up`];
    /// otherwise every item is a match replayed.
    fn merge(lists: &[Vec<u64>], in_runs: bool) -> Vec<(u64, usize)> {
        let mut next = vec![0usize; lists.len()];
        let head = |l: &Vec<u64>, n: usize| l.get(n).copied().unwrap_or(TournamentTree::DONE);
        let mut tree = TournamentTree::new(lists.iter().map(|l| head(l, 0)).collect());
        let mut out = Vec::new();
        while tree.min_key() != TournamentTree::DONE {
            let w = tree.winner();
            let runner_up = tree.runner_up();
            loop {
                out.push((lists[w][next[w]], w));
                next[w] += 1;
                let key = head(&lists[w], next[w]);
                if !in_runs || key == TournamentTree::DONE || (key, w) > runner_up {
                    tree.replace_winner(key);
                    break;
                }
            }
        }
        out
    }

    #[test]
    fn merges_like_a_stable_sort_for_every_stream_count() {
        // Deterministic pseudo-random lists, with ties across streams and empty streams.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for k in 1..=9 {
            let lists: Vec<Vec<u64>> = (0..k)
                .map(|_| {
                    let mut l: Vec<u64> = (0..rand(40)).map(|_| rand(50)).collect();
                    l.sort_unstable();
                    l
                })
                .collect();
            let mut expected: Vec<(u64, usize)> = lists
                .iter()
                .enumerate()
                .flat_map(|(i, l)| l.iter().map(move |&t| (t, i)))
                .collect();
            expected.sort(); // by time, then stream: lowest stream first on ties
            assert_eq!(merge(&lists, false), expected, "{k} streams");
            assert_eq!(merge(&lists, true), expected, "{k} streams, in runs");
        }
    }

    #[test]
    fn alternating_streams_come_out_interleaved() {
        let lists = vec![vec![1, 3, 5], vec![2, 4, 6]];
        let order: Vec<usize> = merge(&lists, false).iter().map(|&(_, s)| s).collect();
        assert_eq!(order, [0, 1, 0, 1, 0, 1]);
        // Ties go to the lower stream, also within a run; a run stops where another
        // stream's head comes first.
        let lists = vec![vec![1, 2, 2, 4], vec![2, 3]];
        assert_eq!(
            merge(&lists, true),
            [(1, 0), (2, 0), (2, 0), (2, 1), (3, 1), (4, 0)]
        );
    }

    #[test]
    fn every_stream_empty_means_done_at_once() {
        let tree = TournamentTree::new(vec![TournamentTree::DONE; 3]);
        assert_eq!(tree.min_key(), TournamentTree::DONE);
    }
}
