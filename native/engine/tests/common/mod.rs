//! Helpers shared by the engine's integration tests (`mod common;` in each test file).

/// A TIFF/EXIF block (little endian) with IFD0 = { Orientation = o }.
pub fn exif_with_orientation(o: u16) -> Vec<u8> {
    let mut b = b"II".to_vec();
    b.extend(42u16.to_le_bytes());
    b.extend(8u32.to_le_bytes());
    b.extend(1u16.to_le_bytes());
    b.extend(0x0112u16.to_le_bytes());
    b.extend(3u16.to_le_bytes());
    b.extend(1u32.to_le_bytes());
    b.extend(o.to_le_bytes());
    b.extend([0, 0]);
    b.extend(0u32.to_le_bytes());
    b
}
