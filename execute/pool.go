package execute

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ndtrace/ndtrace/sandbox"
)

// SandboxPool hands out up to Size sandboxes, built on first use and reused: the worker's tracing
// concurrency.
type SandboxPool struct {
	cfg  sandbox.Config
	free chan *sandbox.Sandbox
	slot chan struct{}
	mu   sync.Mutex
	all  []*sandbox.Sandbox
}

// NewSandboxPool returns a pool of at most size sandboxes built from cfg.
func NewSandboxPool(cfg sandbox.Config, size int) *SandboxPool {
	if size < 1 {
		size = 1
	}
	return &SandboxPool{cfg: cfg, free: make(chan *sandbox.Sandbox, size), slot: make(chan struct{}, size)}
}

// Get returns a sandbox and the function that gives it back.
func (p *SandboxPool) Get(ctx context.Context) (*sandbox.Sandbox, func(), error) {
	select {
	case sb := <-p.free:
		return sb, func() { p.free <- sb }, nil
	case p.slot <- struct{}{}:
		sb, err := sandbox.New(ctx, p.cfg)
		if err != nil {
			<-p.slot
			return nil, nil, fmt.Errorf("sandbox: %w", err)
		}
		p.started(sb)
		return sb, func() { p.free <- sb }, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// started records a new sandbox and logs the isolation it got, which depends on the node.
func (p *SandboxPool) started(sb *sandbox.Sandbox) {
	p.mu.Lock()
	p.all = append(p.all, sb)
	p.mu.Unlock()
	info := sb.Info()
	cg := info.Cgroup
	if cg == "" {
		cg = "none (rlimits)"
	}
	slog.Info("sandbox started", "backend", sb.Config().Backend, "python", info.Python, "landlock_abi", info.Landlock, "cgroup", cg, "memory_bound", info.Memory)
	if info.Landlock == 0 {
		slog.Warn("sandbox: the kernel has no Landlock: items get no /proc (docs/sandbox.md)")
	}
}

// Close stops every sandbox of the pool.
func (p *SandboxPool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sb := range p.all {
		sb.Close()
	}
	p.all = nil
}

// Warm builds sandboxes, all at once, until n of them (at most the pool's size) exist, so that
// the first items do not wait for a sandbox to start. It fails, as the first item would, when
// this machine cannot sandbox.
func (p *SandboxPool) Warm(ctx context.Context, n int) error {
	var g errgroup.Group
	for ; n > 0; n-- {
		select {
		case p.slot <- struct{}{}:
		default:
			n = 0 // every sandbox exists already
			continue
		}
		g.Go(func() error {
			sb, err := sandbox.New(ctx, p.cfg)
			if err != nil {
				<-p.slot
				return fmt.Errorf("sandbox: %w", err)
			}
			p.started(sb)
			p.free <- sb
			return nil
		})
	}
	return g.Wait()
}

// Config returns the configuration the pool's sandboxes are built from.
func (p *SandboxPool) Config() sandbox.Config { return p.cfg }
