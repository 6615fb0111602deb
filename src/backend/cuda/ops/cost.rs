//! Prepared costs: a dense matrix (with its transpose and the scratch of its split
//! half-steps), a separable grid, or two point clouds.

use super::grid::check_grid;
use super::pointcloud::CudaCloud;
use super::tiled::SplitHints;
use crate::backend::cuda::runtime::device::CudaBackend;
use crate::backend::cuda::runtime::kernels::{kernel_name, CudaReal};
use crate::backend::cuda::runtime::launch::{to_i32, Context, Launch};
use crate::backend::cuda::runtime::tuning::CloudForm;
use crate::backend::{CostDims, CostSource, GridCost, Side};
use crate::{Error, Result};
use cudarc::driver::CudaSlice;
use std::borrow::Cow;

/// A cost prepared for the GPU ([`Backend::Cost`](crate::Backend::Cost) of the CUDA
/// backend).
pub struct CudaCost<T> {
    pub(in crate::backend::cuda) kind: CostKind<T>,
}

/// The three kinds of cost the kernels read.
pub(in crate::backend::cuda) enum CostKind<T> {
    /// A stored matrix, shared or one per problem.
    Dense(DenseCost<T>),
    /// Squared distances on a regular grid, computed on the fly ([`CostSource::Grid`]).
    Grid(GridCost),
    /// Distances between two point clouds, computed on the fly.
    Cloud(CudaCloud<T>),
}

impl<T> CudaCost<T> {
    /// Sizes of the cost.
    pub(in crate::backend::cuda) fn dims(&self) -> CostDims {
        match &self.kind {
            CostKind::Dense(d) => d.dims,
            CostKind::Grid(g) => CostDims {
                n: g.len(),
                m: g.len(),
                batch: None,
            },
            CostKind::Cloud(c) => c.dims(),
        }
    }
}

impl<T> CudaCost<T> {
    /// The point clouds of a point-cloud cost; [`Error::Unavailable`] naming `what` for
    /// another kind of cost.
    pub(in crate::backend::cuda) fn cloud(&self, what: &str) -> Result<&CudaCloud<T>> {
        match &self.kind {
            CostKind::Cloud(cl) => Ok(cl),
            _ => Err(Error::Unavailable(format!(
                "{what} needs a point-cloud cost (CostSource::PointCloud)"
            ))),
        }
    }
}

impl<T> std::fmt::Debug for CudaCost<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            CostKind::Dense(_) => "dense",
            CostKind::Grid(_) => "grid",
            CostKind::Cloud(_) => "point clouds",
        };
        write!(f, "CudaCost({kind}, {:?})", self.dims())
    }
}

/// A dense cost: `C` (`[B×]n×m`) and `Cᵀ` (`[B×]m×n`), so that both half-steps stream
/// rows.
pub(in crate::backend::cuda) struct DenseCost<T> {
    pub dims: CostDims,
    pub c: CudaSlice<T>,
    pub ct: CudaSlice<T>,
    /// Scratch of the half-steps whose reduction is split across blocks.
    pub hints: SplitHints<T>,
}

impl<T> DenseCost<T> {
    /// The matrix a half-step on `side` reduces over, its reduction length and its output
    /// length: `C` (`n`, `m`) for the `g` update, `Cᵀ` (`m`, `n`) for the `f` update.
    pub fn reduced(&self, side: Side) -> (&CudaSlice<T>, usize, usize) {
        match side {
            Side::Col => (&self.c, self.dims.n, self.dims.m),
            Side::Row => (&self.ct, self.dims.m, self.dims.n),
        }
    }

    /// Elements between consecutive problems' matrices (0: one matrix shared by the batch).
    pub fn stride(&self) -> i64 {
        match self.dims.batch {
            Some(_) => (self.dims.n * self.dims.m) as i64,
            None => 0,
        }
    }
}

impl CudaBackend {
    /// How a half-step at `eps` on this point-cloud cost forms its exponents (`None` for
    /// other costs and above 16 dimensions). For tests and benchmarks; not part of the API.
    #[doc(hidden)]
    pub fn cloud_form<T: CudaReal>(&self, cost: &CudaCost<T>, eps: T) -> Option<CloudForm> {
        match &cost.kind {
            CostKind::Cloud(cl) => cl.form(eps),
            _ => None,
        }
    }

    /// Prepare any cost source (see [`Backend::prepare_cost`](crate::Backend::prepare_cost)).
    pub(in crate::backend::cuda) fn prepare<T: CudaReal>(
        &self,
        source: &CostSource<'_, T>,
    ) -> Result<CudaCost<T>> {
        let kind = match source {
            CostSource::Dense(c) => {
                let (n, m) = c.dim();
                let dims = CostDims { n, m, batch: None };
                CostKind::Dense(self.prepare_dense(dims, c.as_slice(), || c.iter().copied())?)
            }
            CostSource::DenseBatch(c) => {
                let (b, n, m) = c.dim();
                if b == 0 {
                    return Err(Error::Empty {
                        arg: "cost".into(),
                        detail: "a batch of 0 cost matrices".into(),
                    });
                }
                let dims = CostDims {
                    n,
                    m,
                    batch: Some(b),
                };
                CostKind::Dense(self.prepare_dense(dims, c.as_slice(), || c.iter().copied())?)
            }
            CostSource::Grid(g) => {
                check_grid(g)?;
                CostKind::Grid(g.clone())
            }
            CostSource::PointCloud(p) => CostKind::Cloud(self.upload_cloud(p)?),
        };
        Ok(CudaCost { kind })
    }

    /// Upload `C` (row-major `contiguous`, else the elements of `elements` in order) and
    /// form `Cᵀ` on the GPU.
    fn prepare_dense<'a, T: CudaReal, I: Iterator<Item = T>>(
        &self,
        dims: CostDims,
        contiguous: Option<&'a [T]>,
        elements: impl FnOnce() -> I,
    ) -> Result<DenseCost<T>> {
        if dims.n == 0 || dims.m == 0 {
            return Err(Error::Empty {
                arg: "cost".into(),
                detail: format!("a {}×{} matrix", dims.n, dims.m),
            });
        }
        to_i32(dims.n, "cost rows")?;
        to_i32(dims.m, "cost columns")?;
        let host: Cow<'a, [T]> = match contiguous {
            Some(v) => Cow::Borrowed(v),
            None => Cow::Owned(elements().collect()),
        };
        let mut c = self.alloc::<T>(host.len(), "the cost")?;
        self.stream
            .memcpy_htod(host.as_ref(), &mut c)
            .context("copying the cost")?;
        let ct = self.alloc::<T>(host.len(), "the transposed cost")?;
        self.transpose_batch(&c, &ct, dims)?;
        Ok(DenseCost {
            dims,
            c,
            ct,
            hints: SplitHints::new(),
        })
    }

    /// `ct[b] = c[b]ᵀ` for each of the cost's matrices: 32×32 tiles of 32×8 threads, at
    /// most 65535 matrices (the grid's z dimension) per launch.
    pub(in crate::backend::cuda) fn transpose_batch<T: CudaReal>(
        &self,
        c: &CudaSlice<T>,
        ct: &CudaSlice<T>,
        dims: CostDims,
    ) -> Result<()> {
        let (gx, gy) = (dims.m.div_ceil(32), dims.n.div_ceil(32));
        let per = (dims.n * dims.m) as u64 * std::mem::size_of::<T>() as u64;
        let (pc, pt) = (self.ptr(c), self.ptr(ct));
        let (n, m) = (dims.n as i32, dims.m as i32);
        let matrices = dims.batch.unwrap_or(1);
        let mut b0 = 0usize;
        while b0 < matrices {
            let count = (matrices - b0).min(65535);
            if gx > i32::MAX as usize || gy > 65535 {
                return Err(Error::shape(
                    "cost",
                    format!(
                        "{}×{} is too large for the transpose kernel",
                        dims.n, dims.m
                    ),
                ));
            }
            let cfg = Launch::new((gx as u32, gy as u32, count as u32), (32, 8, 1));
            let (src, dst) = (pc + b0 as u64 * per, pt + b0 as u64 * per);
            // SAFETY: `transpose(const T *in, T *out, int n, int m)` over `count` n×m
            // matrices of `c` into `ct`, both of the cost's length.
            unsafe { self.launch(&kernel_name::<T>("transpose"), cfg, (src, dst, n, m)) }?;
            b0 += count;
        }
        Ok(())
    }
}
