//! How a cost is split over the members of a [`super::Cluster`].

use super::{ClusterCost, Member};
use crate::backend::{CostSource, PointCloudCost};
use crate::{Real, Result};
use ndarray::{s, Axis};
use std::ops::Range;

/// The share of each member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Split {
    /// Member `k` holds the target points (columns of `C`) `ranges[k]` of every problem.
    Columns(Vec<Range<usize>>),
    /// Member `k` holds problems `even_ranges(B, P)[k]` (with the whole cost when it is
    /// shared; batched point clouds: that member's pairs).
    Problems,
}

/// `0..len` cut into `parts` consecutive ranges of `⌈len/parts⌉` (the last ones shorter or
/// empty).
pub(super) fn even_ranges(len: usize, parts: usize) -> Vec<Range<usize>> {
    let chunk = len.div_ceil(parts.max(1));
    (0..parts)
        .map(|k| (k * chunk).min(len)..((k + 1) * chunk).min(len))
        .collect()
}

/// Each member's share of `cost`, prepared by that member.
pub(super) fn prepare<T: Real, B: Member<T>>(
    members: &[B],
    cost: &CostSource<'_, T>,
) -> Result<ClusterCost<B::Cost>> {
    let dims = cost.dims();
    let p = members.len();
    type Share<'s, B, C> = &'s dyn Fn(&B, &Range<usize>) -> Result<C>;
    let each = |ranges: &[Range<usize>], share: Share<'_, B, B::Cost>| {
        members
            .iter()
            .zip(ranges)
            .map(|(be, r)| match r.is_empty() {
                true => Ok(None),
                false => share(be, r).map(Some),
            })
            .collect::<Result<Vec<_>>>()
    };
    let (parts, split) = match cost {
        // One pair per problem: each member holds its problems' pairs, as for DenseBatch.
        CostSource::PointCloud(pc) if pc.batch().is_some() => {
            let ranges = even_ranges(pc.x().dim().0, p);
            let parts = each(&ranges, &|be, r| {
                let (x, y) = (pc.x(), pc.y());
                let share = PointCloudCost::batched_with_metric(
                    x.slice(s![r.clone(), .., ..]),
                    y.slice(s![r.clone(), .., ..]),
                    pc.metric(),
                )?
                .with_precision(pc.precision());
                be.prepare_cost(&share.into())
            })?;
            (parts, Split::Problems)
        }
        CostSource::PointCloud(pc) => {
            let ranges = even_ranges(dims.m, p);
            let parts = each(&ranges, &|be, r| {
                let shared = pc.problem(0);
                let (x, y) = (shared.x(), shared.y());
                let share = PointCloudCost::with_metric(
                    x.index_axis_move(Axis(0), 0),
                    y.index_axis_move(Axis(0), 0).slice_move(s![r.clone(), ..]),
                    pc.metric(),
                )?
                .with_precision(pc.precision());
                be.prepare_cost(&share.into())
            })?;
            (parts, Split::Columns(ranges))
        }
        CostSource::Dense(c) => {
            let ranges = even_ranges(dims.m, p);
            let parts = each(&ranges, &|be, r| {
                let share = c.slice(s![.., r.clone()]).as_standard_layout().into_owned();
                be.prepare_cost(&CostSource::Dense(share.view()))
            })?;
            (parts, Split::Columns(ranges))
        }
        CostSource::DenseBatch(c) => {
            let ranges = even_ranges(c.dim().0, p);
            let parts = each(&ranges, &|be, r| {
                let share = c.slice(s![r.clone(), .., ..]);
                be.prepare_cost(&CostSource::DenseBatch(share))
            })?;
            (parts, Split::Problems)
        }
        CostSource::Grid(_) => {
            let parts = members
                .iter()
                .map(|be| be.prepare_cost(cost).map(Some))
                .collect::<Result<Vec<_>>>()?;
            (parts, Split::Problems)
        }
    };
    Ok(ClusterCost { parts, dims, split })
}

#[cfg(test)]
mod tests {
    use super::even_ranges;

    #[test]
    fn even_ranges_cover_in_order() {
        for len in 0..20 {
            for parts in 1..6 {
                let r = even_ranges(len, parts);
                assert_eq!(r.len(), parts);
                assert_eq!(r[0].start, 0);
                assert_eq!(r[parts - 1].end, len);
                for w in r.windows(2) {
                    assert_eq!(w[0].end, w[1].start);
                    assert!(w[0].len() >= w[1].len());
                }
                assert!(r.iter().all(|x| x.len() <= len.div_ceil(parts)));
            }
        }
    }
}
