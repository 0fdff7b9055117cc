//! The few tensors of a static embedding model, read from a safetensors file: an 8-byte
//! little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
//! then the tensors' bytes.
//!
//! Only what a model2vec model holds is read: a float matrix (`F32`, `F16` or `BF16`), and
//! integer vectors (`I32`, `I64`). Everything is converted to `f32` / `u32` on load.

use std::collections::HashMap;

use serde::Deserialize;

/// Why the file cannot be read as a safetensors file of this kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SafetensorsProblem {
    /// The file is shorter than its header says.
    #[error("the file is truncated")]
    Truncated,
    /// The header is not the expected JSON.
    #[error("the header is not valid JSON: {0}")]
    Header(String),
    /// A tensor the model needs is not there.
    #[error("it has no tensor {0:?}")]
    Missing(&'static str),
    /// A tensor has a dtype this reader does not convert.
    #[error("tensor {name:?} has dtype {dtype}, not one of F32, F16, BF16, I32, I64")]
    Dtype {
        /// The tensor.
        name: String,
        /// Its dtype.
        dtype: String,
    },
    /// A tensor's byte range does not match its shape and dtype.
    #[error("tensor {0:?} has a byte range that does not fit its shape")]
    Shape(String),
}

#[derive(Debug, Deserialize)]
struct TensorInfo {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [usize; 2],
}

/// A parsed safetensors file, borrowing its bytes.
#[derive(Debug)]
pub(super) struct Tensors<'a> {
    infos: HashMap<String, TensorInfo>,
    data: &'a [u8],
}

/// A tensor converted to `f32`: its shape and values, row-major.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Matrix {
    pub(super) shape: Vec<usize>,
    pub(super) values: Vec<f32>,
}

impl<'a> Tensors<'a> {
    /// Parses the header of `bytes`.
    pub(super) fn parse(bytes: &'a [u8]) -> Result<Self, SafetensorsProblem> {
        let (len, rest) = bytes.split_first_chunk::<8>().ok_or(SafetensorsProblem::Truncated)?;
        let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|_| SafetensorsProblem::Truncated)?;
        if rest.len() < len {
            return Err(SafetensorsProblem::Truncated);
        }
        let (header, data) = rest.split_at(len);
        let raw: HashMap<String, serde_json::Value> =
            serde_json::from_slice(header).map_err(|e| SafetensorsProblem::Header(e.to_string()))?;
        let mut infos = HashMap::new();
        for (name, value) in raw {
            if name == "__metadata__" {
                continue;
            }
            let info: TensorInfo =
                serde_json::from_value(value).map_err(|e| SafetensorsProblem::Header(e.to_string()))?;
            infos.insert(name, info);
        }
        Ok(Self { infos, data })
    }

    /// Whether the file has tensor `name`.
    pub(super) fn has(&self, name: &str) -> bool {
        self.infos.contains_key(name)
    }

    /// Tensor `name` as `f32`s.
    pub(super) fn floats(&self, name: &'static str) -> Result<Matrix, SafetensorsProblem> {
        let (info, bytes) = self.tensor(name)?;
        let values = match info.dtype.as_str() {
            "F32" => bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            "F16" => bytes
                .chunks_exact(2)
                .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
                .collect(),
            "BF16" => bytes
                .chunks_exact(2)
                .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
                .collect(),
            _ => return Err(dtype_problem(name, info)),
        };
        Ok(Matrix {
            shape: info.shape.clone(),
            values,
        })
    }

    /// Tensor `name` as non-negative integers (a negative value is a shape problem).
    pub(super) fn indices(&self, name: &'static str) -> Result<Vec<u32>, SafetensorsProblem> {
        let (info, bytes) = self.tensor(name)?;
        let wide: Vec<i64> = match info.dtype.as_str() {
            "I32" => bytes
                .chunks_exact(4)
                .map(|b| i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                .collect(),
            "I64" => bytes
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                .collect(),
            _ => return Err(dtype_problem(name, info)),
        };
        wide.into_iter()
            .map(|v| u32::try_from(v).map_err(|_| SafetensorsProblem::Shape(name.to_owned())))
            .collect()
    }

    fn tensor(&self, name: &'static str) -> Result<(&TensorInfo, &'a [u8]), SafetensorsProblem> {
        let info = self.infos.get(name).ok_or(SafetensorsProblem::Missing(name))?;
        let width = match info.dtype.as_str() {
            "F32" | "I32" => 4,
            "F16" | "BF16" => 2,
            "I64" => 8,
            _ => return Err(dtype_problem(name, info)),
        };
        let [start, end] = info.data_offsets;
        let expected = info.shape.iter().product::<usize>().checked_mul(width);
        let bytes = self.data.get(start..end).ok_or(SafetensorsProblem::Truncated)?;
        if expected != Some(bytes.len()) {
            return Err(SafetensorsProblem::Shape(name.to_owned()));
        }
        Ok((info, bytes))
    }
}

fn dtype_problem(name: &str, info: &TensorInfo) -> SafetensorsProblem {
    SafetensorsProblem::Dtype {
        name: name.to_owned(),
        dtype: info.dtype.clone(),
    }
}

/// IEEE 754 half precision to single: sign, exponent and mantissa moved over, subnormals scaled.
fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exponent = u32::from((h >> 10) & 0x1f);
    let mantissa = u32::from(h & 0x3ff);
    let bits = match (exponent, mantissa) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: m · 2^-24.
            let value = m as f32 * (1.0 / 16_777_216.0);
            return if sign == 0 { value } else { -value };
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// A safetensors file of the given tensors, for tests: `(name, dtype, shape, bytes)`.
#[cfg(test)]
pub(super) fn write(tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let start = data.len();
        data.extend_from_slice(bytes);
        header.insert(
            (*name).to_owned(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let header = serde_json::to_vec(&header).expect("a JSON object");
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&header);
    out.extend_from_slice(&data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_floats_convert_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert_eq!(f16_to_f32(0x8000), -0.0);
        assert!(f16_to_f32(0x7c00).is_infinite());
    }

    #[test]
    fn a_float16_matrix_reads_as_f32() {
        let bytes: Vec<u8> = [0x3c00u16, 0xc000, 0x0000, 0x3800]
            .iter()
            .flat_map(|h| h.to_le_bytes())
            .collect();
        let file = write(&[("embeddings", "F16", vec![2, 2], bytes)]);
        let tensors = Tensors::parse(&file).expect("parses");
        let m = tensors.floats("embeddings").expect("reads");
        assert_eq!(m.shape, [2, 2]);
        assert_eq!(m.values, [1.0, -2.0, 0.0, 0.5]);
    }

    #[test]
    fn integer_vectors_read_as_indices() {
        let bytes: Vec<u8> = [3i64, 0, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
        let file = write(&[("mapping", "I64", vec![3], bytes)]);
        assert_eq!(
            Tensors::parse(&file).expect("parses").indices("mapping"),
            Ok(vec![3, 0, 7])
        );
    }

    #[test]
    fn a_byte_range_that_does_not_fit_the_shape_is_refused() {
        let file = write(&[("embeddings", "F32", vec![2, 2], vec![0; 12])]);
        let tensors = Tensors::parse(&file).expect("parses");
        assert_eq!(
            tensors.floats("embeddings"),
            Err(SafetensorsProblem::Shape("embeddings".into()))
        );
    }

    #[test]
    fn a_truncated_file_is_refused() {
        let file = write(&[("embeddings", "F32", vec![1], vec![0; 4])]);
        assert_eq!(Tensors::parse(&file[..10]).err(), Some(SafetensorsProblem::Truncated));
    }

    #[test]
    fn a_missing_tensor_is_named() {
        let file = write(&[]);
        let tensors = Tensors::parse(&file).expect("parses");
        assert_eq!(
            tensors.floats("embeddings"),
            Err(SafetensorsProblem::Missing("embeddings"))
        );
    }
}
