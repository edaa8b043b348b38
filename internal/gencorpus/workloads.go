package gencorpus

// Workloads of the trace-path benchmarks (sandbox, cmd/ndtrace): one copy of each.
const (
	// LoopWorkload is a CPU-bound function with a long trace of one frame and four small locals,
	// and no growing container, so that a naive tracer that reprs every local is not quadratic:
	// f(60000) makes 240,005 events, f(76000) about 305,000.
	LoopWorkload = `def f(n):
    total = 0
    for i in range(n):
        x = i * i
        if x % 3 == 0:
            total += x
        else:
            total -= 1
    return total
`
	// ListWorkload keeps a string and a slowly growing list among its locals: f(50000) makes
	// about 200,000 events.
	ListWorkload = `def work(n):
    total = 0
    text = ''
    items = []
    for i in range(n):
        total += i * i
        text = str(i)
        if i % 100 == 0:
            items.append(text)
    return total, len(items)

def f(n):
    return work(n)
`
)
