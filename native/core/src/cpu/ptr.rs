//! A raw output pointer that rayon's closures may share: each parallel task writes a disjoint
//! range of the buffer behind it (the callers' loops guarantee that, not the type).

#[derive(Clone, Copy)]
pub struct SendPtr(pub *mut f32);
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}
