//! Partitioned merges (seed 000 ch. 5) on the model: sub-merges of the
//! planner's groups, outputs cut every θ bytes or at BINARYSPLIT's bounds.

use lamina_compaction::partition::{binary_split, dyadic_root, Partition, Partitioning};
use lamina_compaction::plan;
use lamina_compaction::FileView;

use super::Simulator;
use crate::cut::{count_cut_work, oldest, Meets, Piece};
use crate::keys::key_value;

impl Simulator {
    /// A partitioned merge (seed 000 Alg. 5.3) on the model: the planner's
    /// groups; a one-file group moves, every other one is a sub-merge whose
    /// output the partitioner cuts, sized from the inputs' even density.
    /// Returns the outputs (in key order) and the total size meanwhile.
    pub(super) fn partitioned_merge(&mut self, plan: &plan::Plan) -> (Vec<FileView>, u64) {
        let Some(p) = plan.partitioning else {
            return (Vec::new(), self.total_bytes);
        };
        let overhead = self.opts.file_overhead;
        let mut outputs: Vec<FileView> = Vec::new();
        let mut merged_in = 0;
        let mut written = 0;
        let mut sub_merges = 0;
        for group in plan.groups() {
            if let [(i, f)] = group.as_slice() {
                outputs.push(plan.inputs[*i].files[*f].clone());
                self.moved_files += 1;
                continue;
            }
            sub_merges += 1;
            let mut run_data = vec![0u64; plan.inputs.len()];
            let mut pieces = Vec::with_capacity(group.len());
            for &(i, f) in &group {
                let file = &plan.inputs[i].files[f];
                run_data[i] += file.size.saturating_sub(overhead);
                merged_in += file.size;
                pieces.push(Piece {
                    lo: key_value(&file.smallest),
                    hi: key_value(&file.largest),
                    size: file.size,
                    seq: file.smallest_seq,
                });
            }
            let data = self.output_bytes(&run_data);
            let lo = pieces.iter().map(|p| p.lo).min().unwrap_or(0);
            let hi = pieces.iter().map(|p| p.hi).max().unwrap_or(u64::MAX);
            let files = self.partition_cut(&pieces, data, lo, hi, p);
            written += files.iter().map(|f| f.size).sum::<u64>();
            outputs.extend(files);
        }
        outputs.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        let during = self.total_bytes + written;
        self.total_bytes = self.total_bytes + written - merged_in;
        if sub_merges == 0 {
            self.trivial_moves += 1;
        } else {
            self.merge_bytes += written;
            self.merges += 1;
            self.sub_merges += sub_merges;
        }
        let moved: std::collections::HashSet<u64> = outputs.iter().map(|f| f.id).collect();
        for id in plan.input_file_ids().filter(|id| !moved.contains(id)) {
            self.step_files.remove(&id);
        }
        for f in &outputs {
            self.step_files.entry(f.id).or_insert(f.size);
        }
        (outputs, during)
    }

    /// Cuts `out` data bytes over `[lo, hi]` (spread like `pieces`) into
    /// files as partitioning `p` does: every θ bytes (`size`), or at the
    /// bounds of BINARYSPLIT over the range (`local`) or its dyadic root
    /// (`global`), each file spanning its bound within `[lo, hi]`.
    pub(super) fn partition_cut(
        &mut self,
        pieces: &[Piece],
        out: u64,
        lo: u64,
        hi: u64,
        p: Partitioning,
    ) -> Vec<FileView> {
        if !p.partition.uses_ranges() {
            return self.cut(pieces, out, lo, hi, p.theta);
        }
        let input: u64 = pieces.iter().map(|p| p.size).sum();
        let scale = if input == 0 {
            0.0
        } else {
            out as f64 / input as f64
        };
        // BINARYSPLIT asks for the bytes in about two ranges per file it
        // cuts: summing every piece each time made a merge quadratic in its
        // files (a flush spans the whole key space, so no cursor skips).
        let meets = Meets::new(pieces);
        let size_in = |l: u64, u: u64| -> u64 {
            let mut total = 0.0;
            meets.each_meeting(l, u, |piece| {
                let (a, b) = (l.max(piece.lo), u.min(piece.hi));
                if a <= b {
                    let width = (piece.hi - piece.lo) as f64 + 1.0;
                    total += piece.size as f64 * scale * ((b - a) as f64 + 1.0) / width;
                }
            });
            total.round() as u64
        };
        let (l, u) = if p.partition == Partition::Global {
            dyadic_root(lo, hi)
        } else {
            (lo, hi)
        };
        let bounds = binary_split(l, u, p.theta, &size_in);
        let overhead = self.opts.file_overhead;
        let mut files = Vec::with_capacity(bounds.len());
        let mut written = 0;
        let seq = oldest(pieces);
        for (n, &(a, b)) in bounds.iter().enumerate() {
            let size = if n + 1 == bounds.len() {
                out.saturating_sub(written)
            } else {
                size_in(a, b).min(out - written)
            };
            written += size;
            let id = self.alloc_id();
            files.push(self.new_file(id, size.saturating_add(overhead), a.max(lo), b.min(hi), seq));
        }
        count_cut_work(0, files.len() as u64);
        files
    }
}
