package services

import "context"

type taintSourceKey struct{}

// WithTaintSource gives the tools called under ctx the untrusted sources
// behind the calling loop's taint: roots reports them ("; "-joined, as a
// row's tainted_by) or "" while the loop is clean. It is asked at each
// write, so a loop tainted midway is seen as tainted from then on.
func WithTaintSource(ctx context.Context, roots func() string) context.Context {
	return context.WithValue(ctx, taintSourceKey{}, roots)
}

// TaintOf is what a tool's write under ctx records as its tainted_by: the
// sources WithTaintSource reports, "" when the loop is clean or ctx has
// none (a write by the service or the owner).
func TaintOf(ctx context.Context) string {
	if f, ok := ctx.Value(taintSourceKey{}).(func() string); ok && f != nil {
		return f()
	}
	return ""
}
