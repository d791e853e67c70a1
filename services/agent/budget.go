package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
)

// reservation is a model call's reservation: its hold, the request's
// prompt tokens, and the refusal (CodeBudgetExceeded) or failure that
// keeps the call from being made.
type reservation struct {
	hold   services.BudgetHold
	prompt int
	err    error
}

// budgetCall is what a model call of the loop's kind asks of its budget.
func (s *Service) budgetCall(kind services.BudgetKind, provider llm.Provider, req llm.Request) services.BudgetCall {
	return services.BudgetCall{Kind: kind, Model: provider.Model(), PromptTokens: req.EstimateTokens(s.opts.Tokenizer.Count), MaxOutput: s.maxOutput(req)}
}

// reserve reserves a model call's estimated cost, the request's tokens
// (counted with the tokenizer) and its largest answer, in tokens and at
// the loop's model's price, against the loop's daily budgets; a call that
// would pass one is not made (services.CodeBudgetExceeded).
func (s *Service) reserve(ctx context.Context, l loopSpec, req llm.Request) reservation {
	if s.opts.Budgets == nil {
		return reservation{}
	}
	call := s.budgetCall(l.e.pol.budget, l.provider, req)
	hold, err := s.opts.Budgets.Reserve(ctx, call)
	return reservation{hold: hold, prompt: call.PromptTokens, err: err}
}

// reserveIn is reserve in tx, the caller's transaction (a main run's
// first call, reserved in its prompt step's transaction): a refusal is
// the reservation's error and the transaction commits the refusal's
// count; nil without budgets.
func (s *Service) reserveIn(ctx context.Context, tx services.Tx, call services.BudgetCall) (r *reservation, err error) {
	if s.opts.Budgets == nil {
		return nil, nil
	}
	hold, err := s.opts.Budgets.ReserveTx(ctx, tx, call)
	if err != nil && services.ErrorCode(err) != services.CodeBudgetExceeded {
		return nil, err
	}
	return &reservation{hold: hold, prompt: call.PromptTokens, err: err}, nil
}

// used is what a call used: its reported usage, estimated from the
// request and the answer when the provider reports none; nothing for a
// call that failed.
func (s *Service) used(prompt int, resp *llm.Response) services.TokenUsage {
	var used services.TokenUsage
	if resp != nil {
		used = resp.Usage
		if used.PromptTokens+used.CompletionTokens == 0 {
			used = services.TokenUsage{PromptTokens: prompt, CompletionTokens: s.opts.Tokenizer.Count(resp.Text)}
		}
	}
	return used
}

// settleBudget replaces the reservation by the call's usage.
func (s *Service) settleBudget(ctx context.Context, r reservation, resp *llm.Response) {
	if s.opts.Budgets == nil || r.hold.Day == "" {
		return
	}
	s.opts.Budgets.Settle(ctx, r.hold, s.used(r.prompt, resp))
}

// settleCut settles a call that failed: nothing when the provider gave
// nothing (an error before any output); its prompt and the text that
// arrived when the answer was cut after some text or the call was given up
// in flight (a timeout, /stop), which the provider generated and bills.
func (s *Service) settleCut(ctx context.Context, r reservation, err error, text string) {
	if s.opts.Budgets == nil || r.hold.Day == "" {
		return
	}
	var used services.TokenUsage
	if text != "" || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		used = services.TokenUsage{PromptTokens: r.prompt, CompletionTokens: s.opts.Tokenizer.Count(text)}
	}
	s.opts.Budgets.Settle(context.WithoutCancel(ctx), r.hold, used)
}

// pendingSettle is the settlement of a main run's answering call, made in
// the transaction that stores the answer (one commit fewer per turn);
// when that transaction does not commit it, the run's end settles it on
// its own.
type pendingSettle struct {
	r    reservation
	used services.TokenUsage
	// after is the budget's work once the answer's transaction committed
	// (nil: not settled in it).
	after func(context.Context)
}

// settleIn settles p in tx, the answer's transaction.
func (s *Service) settleIn(ctx context.Context, tx services.Tx, p *pendingSettle) error {
	if p == nil {
		return nil
	}
	p.after = nil
	if s.opts.Budgets == nil || p.r.hold.Day == "" {
		return nil
	}
	after, err := s.opts.Budgets.SettleTx(ctx, tx, p.r.hold, p.used)
	if err != nil {
		return err
	}
	p.after = after
	return nil
}

// finishSettle completes p once the answer's transaction ended: its
// after work when that transaction committed the settlement, else the
// settlement on its own.
func (s *Service) finishSettle(ctx context.Context, p *pendingSettle, committed bool) {
	if p == nil || s.opts.Budgets == nil || p.r.hold.Day == "" {
		return
	}
	if committed && p.after != nil {
		p.after(ctx)
		return
	}
	s.opts.Budgets.Settle(ctx, p.r.hold, p.used)
}

// maxOutput is the most a call may answer: the request's bound, or the
// output reserve the prompt keeps free.
func (s *Service) maxOutput(req llm.Request) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return s.opts.Context.Window() - s.opts.Context.Budget()
}

// cmdBudget answers /budget: each kind's spend today against its budget,
// and the last 7 days.
func (s *Service) cmdBudget(ctx context.Context) (string, error) {
	if s.opts.Budgets == nil {
		return "Budgets are not available on this server.", nil
	}
	r, err := s.opts.Budgets.Report(ctx)
	if err != nil {
		return "", err
	}
	return r.Text(), nil
}

// budgetNotice is the owner's notice of a run a budget ended.
func budgetNotice(err error) string {
	msg := services.ErrorMessage(err)
	return fmt.Sprintf("I stopped before the next model call: %s. /budget shows the spend.", strings.TrimSuffix(msg, "."))
}
