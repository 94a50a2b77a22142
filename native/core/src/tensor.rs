//! A dense f32 blob in ncnn's layout: planar, channel-major (c, h, w). `dims` says how many of
//! the axes are meaningful, as in ncnn: 1 = vector (w only), 2 = matrix (h, w), 3 = (c, h, w).
//! Rank-1/2 blobs keep c = 1 (and h = 1 for rank 1).

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dims: u8,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub data: Vec<f32>,
}

impl Tensor {
    pub fn zeros(c: usize, h: usize, w: usize) -> Self {
        Tensor { dims: 3, c, h, w, data: vec![0.0; c * h * w] }
    }
    pub fn from_vec(c: usize, h: usize, w: usize, data: Vec<f32>) -> Self {
        assert_eq!(data.len(), c * h * w, "tensor data length does not match shape");
        Tensor { dims: 3, c, h, w, data }
    }
    pub fn vector(data: Vec<f32>) -> Self {
        Tensor { dims: 1, c: 1, h: 1, w: data.len(), data }
    }
    pub fn matrix(h: usize, w: usize, data: Vec<f32>) -> Self {
        assert_eq!(data.len(), h * w);
        Tensor { dims: 2, c: 1, h, w, data }
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn plane(&self) -> usize {
        self.h * self.w
    }
    pub fn channel(&self, c: usize) -> &[f32] {
        let p = self.plane();
        &self.data[c * p..(c + 1) * p]
    }
    pub fn channel_mut(&mut self, c: usize) -> &mut [f32] {
        let p = self.plane();
        &mut self.data[c * p..(c + 1) * p]
    }
    #[inline]
    pub fn at(&self, c: usize, y: usize, x: usize) -> f32 {
        self.data[(c * self.h + y) * self.w + x]
    }
    /// Shape as ncnn prints it: [w], [w,h] or [w,h,c].
    pub fn shape_string(&self) -> String {
        match self.dims {
            1 => format!("[{}]", self.w),
            2 => format!("[{},{}]", self.w, self.h),
            _ => format!("[{},{},{}]", self.w, self.h, self.c),
        }
    }
}
