// Point-cloud costs computed on the fly (never stored): the half-step, the plan-weighted
// row sums (transport cost, point gradients, P·V) and small plans.
//
// Layouts. Clouds are structure-of-arrays: coordinate t of point i at pts[t·len + i].
// A half-step has an output cloud (L points, one potential each) and a reduced cloud
// (K points, summed over): for the g-update the outputs are Y and the reduction runs over
// X, for the f-update the reverse. Potentials are B×K (`other`) and B×L (`out`, `lm`).
//
// Units. As in sinkstep.cu, values are base 2: with s = log2(e)/eps, coordinates are
// scaled on load by `scale` (sqrt(s) for |x−y|², s for |x−y|) so that the distance formed
// in registers is c·s directly (the exact difference form, d subtractions and d FMAs), and
// potentials by s (the half-step's norm form is described at pc_sinkstep_body). A thread
// keeps TJ outputs; the block streams the reduced cloud through shared memory in stages of
// PC_KT points, and each output folds chunks of PC_CH arguments into a running (shift,
// sum) pair (the half-step raises its shift lazily, the row sums at each larger chunk
// maximum). -inf potentials (zero-mass bins) and the padding of the last stage give
// exp2(-inf) = 0 and never NaN. Both clouds are centred on their common mean (pc_centre_soa).
//
// The kernel families live in parts that this file includes in order (one translation
// unit, one module): pointcloud_fma.cuh (d ≤ 16 by FMAs), pointcloud_anyd.cuh (any d),
// pointcloud_entries.cuh (their entry points, cloud preparation), pointcloud_mma.cuh
// (tensor-core operands, the d = 3 and 4 MMA half-step), pointcloud_tc.cuh (mma.sync
// half-steps) and pointcloud_wg.cuh (warpgroup half-steps).

#include "common.cuh"
#include "pointcloud_fma.cuh"
#include "pointcloud_anyd.cuh"
#include "pointcloud_entries.cuh"
#include "pointcloud_mma.cuh"
#include "pointcloud_tc.cuh"
#include "pointcloud_wg.cuh"
