package retrieval

// matrix holds a corpus's vectors as one contiguous []float32, row after
// row, so an exact search is a single pass over memory the CPU prefetches
// well — the difference between ~25 ms and several times that over
// 100,000 × 256 (a map of slices chases a pointer per row).
//
// Rows are unordered: removing one moves the last row into its place, so
// the matrix stays dense without rewriting it. It is not safe for
// concurrent use; the corpus's lock guards it.
type matrix struct {
	dim  int
	vals []float32
}

func (m *matrix) rows() int { return len(m.vals) / m.dim }

func (m *matrix) row(i int) []float32 { return m.vals[i*m.dim : (i+1)*m.dim : (i+1)*m.dim] }

// add appends v (len dim) and returns its row.
func (m *matrix) add(v []float32) int {
	m.vals = append(m.vals, v...)
	return m.rows() - 1
}

// remove moves the last row into row i and drops the last; it reports
// the row that moved (-1 when i was the last).
func (m *matrix) remove(i int) (moved int) {
	last := m.rows() - 1
	moved = -1
	if i != last {
		copy(m.row(i), m.row(last))
		moved = last
	}
	m.vals = m.vals[:last*m.dim]
	if cap(m.vals) > 4*len(m.vals)+1024 {
		m.vals = append([]float32(nil), m.vals...) // give back memory after mass deletes
	}
	return moved
}

// scores writes the dot product of q with every row into out (len rows).
// Vectors are L2-normalised on the way in, so this is cosine similarity.
func (m *matrix) scores(q []float32, out []float32) {
	d := m.dim
	for i := range out {
		out[i] = dot(q, m.vals[i*d:(i+1)*d])
	}
}

// dot is an 8-way unrolled dot product with four accumulators: enough
// independent additions to keep the FPU busy, and one bounds check per
// eight elements instead of one per element.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa, bb := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += aa[0]*bb[0] + aa[4]*bb[4]
		s1 += aa[1]*bb[1] + aa[5]*bb[5]
		s2 += aa[2]*bb[2] + aa[6]*bb[6]
		s3 += aa[3]*bb[3] + aa[7]*bb[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
