package cuda

import (
	"petal/engine/cuda/driver"
)

// router=cert (route_cert.cu): approximate logits within a bound of the
// exact ones, then qgemm_i8's exact logit only for the experts the bounds
// leave in reach of the top-k, and route_select's choice among them.
const (
	certSelectKernel = "route_cert_select"
	certBoundKernel  = "route_cert_bound"
	certWarps        = 4 // route_cert_select's warps a block (RC_WARPS), a token each
	certMaxExperts   = 1024
	certMaxCols      = 4096
)

// certShapes are route_cert.cu's approximate-logit kernels: qgemm_cert,
// qgemm_i8_wg2's block (32 tokens x 256 rows, 16 warps, one a
// multiprocessor, two groups of columns a stage, two stages) with x in two
// parts, and qgemm_cert16, the same in blocks of 16 tokens (8 warps, two a
// multiprocessor). certShape is the one router=cert takes.
var certShapes = []qiShape{
	{family: "route_cert", kernel: "qgemm_cert", tokens: 32, rows: 256, threads: 512, weight: 4, groups: 2, stages: 2, parts: 2},
	{family: "route_cert", kernel: "qgemm_cert16", tokens: 16, rows: 256, threads: 256, weight: 2, groups: 2, stages: 2, parts: 2},
}

var certShape = certShapes[0]

// certSelectShared is route_cert_select's dynamic shared memory for a
// router of E rows of cols columns (rc_bytes a warp).
func certSelectShared(cols, E int) int {
	return certWarps * (8*34*(cols/64) + 4*cols + 16*E)
}

// certSelectMaxShared is certSelectShared at the largest router it takes.
var certSelectMaxShared = certSelectShared(certMaxCols, certMaxExperts)

// certFits says whether router=cert takes a Route by router q: one that
// renormalises its weights over the chosen (the others' weights need every
// exact logit), groups of 64 (the caller checks), at most certMaxExperts
// rows and certMaxCols columns.
func certFits(q *QMatrix, normalize bool) bool {
	return normalize && q.Rows <= certMaxExperts && q.Cols <= certMaxCols
}

// certBound is route_cert_bound's table of w (one float a group of 64
// columns), made on the device the first time w is routed and kept until
// Close.
func (b *Backend) certBound(w *matrix) (driver.Ptr, error) {
	if p, ok := b.certBounds[w]; ok {
		return p, nil
	}
	groups := w.q.Cols / 64
	p, err := b.alloc(4*int64(groups), "router=cert's bounds of a router")
	if err != nil {
		return 0, err
	}
	b.held = append(b.held, p)
	var a driver.Args
	a.Ptr(w.desc).Ptr(p)
	if err := b.s.Launch(b.fn[certBoundKernel], driver.D1(groups), driver.D1(256), 0, &a); err != nil {
		return 0, err
	}
	if b.certBounds == nil {
		b.certBounds = map[*matrix]driver.Ptr{}
	}
	b.certBounds[w] = p
	return p, nil
}

// certRouteSteps are router=cert's two launches for a Route of rows
// tokens: qgemm_cert's approximate logits and bounds into the scratch
// from *off, then route_cert_select's choice into idx and wts, with the
// exact logits split over the columns as router=i8wg's qgemm_i8_wg2
// splits them (so that they are its bits).
func (b *Backend) certRouteSteps(p *program, w *matrix, x, idx, wts driver.Ptr, rows, topK int, off *int64) ([]step, error) {
	q := w.q
	E, C := q.Rows, q.Cols
	bound, err := b.certBound(w)
	if err != nil {
		return nil, err
	}
	sms := b.ctx.Device().SMs
	sh := certShape
	splits := routerSplits(sh.weight*ceil(E, sh.rows)*ceil(rows, sh.tokens), C/64, sms)
	exact := qiShapes[RouterI8WG]
	exactSplits := routerSplits(exact.weight*ceil(E, exact.rows)*ceil(rows, exact.tokens), C/64, sms)
	aOff := p.reserve(off, 4*int64(splits*rows*E))
	eOff := p.reserve(off, 4*int64(splits*rows))
	grid := driver.Dim3{X: ceil(E, sh.rows), Y: ceil(rows, sh.tokens), Z: splits}
	return []step{
		b.launch(sh.kernel, grid, driver.D1(sh.threads), sh.shared(), func(a *driver.Args) {
			a.Ptr(w.desc).Ptr(x).Ptr(p.scratch.Add(aOff)).I32(int32(rows)).I32(int32(E)).Ptr(bound).Ptr(p.scratch.Add(eOff))
		}),
		b.launch(certSelectKernel, driver.D1(ceil(rows, certWarps)), driver.D1(32*certWarps), certSelectShared(C, E), func(a *driver.Args) {
			a.Ptr(w.desc).Ptr(x).Ptr(p.scratch.Add(aOff)).Ptr(p.scratch.Add(eOff)).Ptr(idx).Ptr(wts).
				I32(int32(rows)).I32(int32(topK)).I32(int32(splits)).I32(int32(exactSplits))
		}),
	}, nil
}
