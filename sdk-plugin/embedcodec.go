package sdk

import (
	"errors"
	"math"
	"strconv"

	"adhost/abi"
)

// appendEmbedOutput appends o as EmbedOutput JSON, byte for byte what
// json.Marshal produces, without reflection. It exists for speed: one call
// of an embedder returns batch_texts × dimensions floats (32 × 256 for
// the dev corpus), and encoding/json spent ~3 µs a float in the guest —
// about two thirds of local-hashing's whole ingest time (profile of
// BenchmarkIngest). Zero, whole and half values, which feature-hashing
// vectors are made of, are written without strconv's shortest-float
// search; every other value goes through strconv.AppendFloat exactly as
// encoding/json's float encoder does. NaN and ±Inf fail as they do in
// json.Marshal.
func appendEmbedOutput(dst []byte, o *abi.EmbedOutput) ([]byte, error) {
	dst = append(dst, `{"vectors":`...)
	if o.Vectors == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, v := range o.Vectors {
			if i > 0 {
				dst = append(dst, ',')
			}
			if v == nil {
				dst = append(dst, "null"...)
				continue
			}
			dst = append(dst, '[')
			for j, f := range v {
				if j > 0 {
					dst = append(dst, ',')
				}
				var err error
				if dst, err = appendFloat32(dst, f); err != nil {
					return dst, fieldError("vectors["+strconv.Itoa(i)+"]["+strconv.Itoa(j)+"]", err)
				}
			}
			dst = append(dst, ']')
		}
		dst = append(dst, ']')
	}
	if o.Usage != nil {
		dst = append(dst, `,"usage":`...)
		dst = AppendUsage(dst, o.Usage)
	}
	return append(dst, '}'), nil
}

var errNonFinite = errors.New("unsupported value: NaN or infinite float")

// appendFloat32 is encoding/json's float32 encoding.
func appendFloat32(dst []byte, f float32) ([]byte, error) {
	if f != f || math.IsInf(float64(f), 0) {
		return dst, errNonFinite
	}
	// Exact halves below 2^22 print as their integer part and ".5" (or
	// nothing) in the shortest form too: the fast path.
	if twice := f * 2; twice == float32(int32(twice)) && twice < 1<<23 && twice > -(1<<23) {
		n := int32(twice)
		if math.Signbit(float64(f)) {
			dst = append(dst, '-')
			n = -n
		}
		dst = strconv.AppendInt(dst, int64(n/2), 10)
		if n%2 != 0 {
			dst = append(dst, ".5"...)
		}
		return dst, nil
	}
	abs := float32(math.Abs(float64(f)))
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, float64(f), format, -1, 32)
	if format == 'e' {
		// "1e-07" → "1e-7", as encoding/json writes it.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}
