// Command soak holds many websocket clients on one or more `switchboard
// serve` processes while a steady stream of messages is posted and answered
// by a fake model, and reports, per interval: post latency, delivery latency
// (post sent → frame received, over every client), turn latency (post sent
// → the agent's answer received), errors, and each server's RSS, open file
// descriptors and goroutines (from /metrics, when the server has it).
// At the end every client's ids are checked against the timeline: nothing
// missing, nothing twice, in order.
//
//	go run ./scripts/soak                                  1,000 clients, 10 minutes, one instance
//	go run ./scripts/soak -instances 2 -duration 2m        the same across two instances
//	go run ./scripts/soak -clients 200 -rate 20 -interval 10s
//
// It builds the binary, starts the fake model in-process (llmtest, echo
// answers after -model-latency), makes a fresh schema in the test database
// (TEST_DATABASE_URL, else PostgreSQL on 127.0.0.1:5432) and drops it at the
// end, and raises its open-files limit (inherited by the servers). The
// owner rate limit is turned off for the servers: the clients are all the
// owner.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/scripts/internal/scratch"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

type options struct {
	clients, instances int
	rate               float64
	duration, interval time.Duration
	modelLatency       time.Duration
	bin, dbURL         string
}

func main() {
	var o options
	flag.IntVar(&o.clients, "clients", 1000, "websocket clients held open (spread over the instances)")
	flag.IntVar(&o.instances, "instances", 1, "serve processes sharing the database")
	flag.Float64Var(&o.rate, "rate", 2, "messages posted per second (each gets an agent answer)")
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "how long to post")
	flag.DurationVar(&o.interval, "interval", 30*time.Second, "report period")
	flag.DurationVar(&o.modelLatency, "model-latency", 200*time.Millisecond, "fake model's delay per answer")
	flag.StringVar(&o.bin, "bin", "", "switchboard binary (default: build ./cmd/switchboard)")
	flag.StringVar(&o.dbURL, "db", os.Getenv("TEST_DATABASE_URL"), "PostgreSQL server URL (default: 127.0.0.1:5432)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// raiseFileLimit lifts the soft open-files limit to the hard one (ulimit -n).
func raiseFileLimit(need uint64) (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if rl.Cur < need {
		return rl.Cur, fmt.Errorf("open-files limit %d is below the %d needed; raise the hard limit (ulimit -Hn)", rl.Cur, need)
	}
	return rl.Cur, nil
}

// instance is one serve process.
type instance struct {
	url string
	cmd *exec.Cmd
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

func startInstance(bin string, env []string, dataDir string) (*instance, error) {
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "DATA_DIR="+dataDir)
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return &instance{url: m[1], cmd: cmd}, nil
		}
	}
	_ = cmd.Wait()
	return nil, errors.New("serve exited before listening")
}

// procStatus reads RSS (MiB) and open file descriptors of pid.
func procStatus(pid int) (rssMiB float64, fds int) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			rssMiB = kb / 1024
		}
	}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return rssMiB, len(ents)
}

// goroutines scrapes go_goroutines from the server's /metrics (-1: none).
func goroutines(base, token string) int {
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return -1
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return -1
}

// window collects one report period's samples.
type window struct {
	mu                      sync.Mutex
	post, delivery, turn    []time.Duration
	posts, postErrors       int
	dialErrors, drops       int
	orderErrors             int
	framesReceived          int64
	answersSeen, answersDup int
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64)
}

// client is one websocket follower.
type client struct {
	inst  int
	start int64 // the id it connected after
	ids   []int64
}

// soak is one run: the servers, the clients and what they saw.
type soak struct {
	o     options
	token string
	insts []*instance
	cur   atomic.Pointer[window]

	sentMu   sync.Mutex
	sentAt   map[string]time.Time // content → when its post was sent
	idSent   map[int64]time.Time  // user message id → when its post was sent
	answered map[int64]bool

	clients   []*client
	connected chan struct{}
	dialSlots chan struct{}
	started   time.Time
}

// frame is what a client decodes of a websocket frame.
type frame struct {
	Type    string `json:"type"`
	LastID  int64  `json:"last_id"`
	Message *struct {
		ID       int64  `json:"id"`
		Role     string `json:"role"`
		Content  string `json:"content"`
		Metadata struct {
			ReplyTo int64 `json:"reply_to"`
		} `json:"metadata"`
	} `json:"message"`
}

func run(ctx context.Context, o options) error {
	if o.instances < 1 || o.clients < 1 || o.rate <= 0 {
		return errors.New("-instances, -clients and -rate must be positive")
	}
	limit, err := raiseFileLimit(uint64(2*o.clients + 1024))
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "switchboard-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if o.bin == "" {
		o.bin = filepath.Join(tmp, "switchboard")
		fmt.Fprintln(os.Stderr, "soak: building ./cmd/switchboard")
		if out, err := exec.Command("go", "build", "-o", o.bin, "./cmd/switchboard").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}

	// A fresh schema, dropped at the end.
	scr, err := scratch.New(ctx, o.dbURL, "soak")
	if err != nil {
		return err
	}
	defer scr.Drop()

	model, err := llmtest.Listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer model.Close()
	model.SetLatency(o.modelLatency)

	s := &soak{o: o, token: "soak-owner-token-" + scr.Name,
		sentAt: map[string]time.Time{}, idSent: map[int64]time.Time{}, answered: map[int64]bool{}}
	s.cur.Store(&window{})
	defer s.stopInstances()
	if err := s.startInstances(tmp, scr.URL, model.OpenAIBaseURL()); err != nil {
		return err
	}
	fmt.Printf("soak: %d clients over %d instance(s), %.1f msg/s for %s, model latency %s, open-files limit %d\n",
		o.clients, o.instances, o.rate, o.duration, o.modelLatency, limit)

	cctx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	var cwg sync.WaitGroup
	if err := s.connectClients(ctx, cctx, &cwg); err != nil {
		return err
	}

	pctx, stopPosting := context.WithTimeout(ctx, o.duration)
	defer stopPosting()
	var pwg sync.WaitGroup
	pwg.Add(1)
	go s.post(pctx, &pwg)

	s.reportUntil(pctx)
	pwg.Wait()
	// Let the last answers arrive, then compare every client with the timeline.
	time.Sleep(3*time.Second + o.modelLatency*4)
	s.report(time.Since(s.started))
	stopClients()
	cwg.Wait()
	return s.verify(ctx, scr.Admin, scr.Name)
}

func (s *soak) startInstances(tmp, dbURL, modelURL string) error {
	env := []string{"DATABASE_URL=" + dbURL, "HTTP_ADDR=127.0.0.1:0", "WEB_AUTH_TOKEN=" + s.token, "LOG_LEVEL=warn",
		"LLM_PROVIDER=openai", "LLM_BASE_URL=" + modelURL, "LLM_MODEL=gpt-4o-mini", "LLM_API_KEY=soak",
		"RATE_LIMIT_PER_MINUTE=0"}
	for i := 0; i < s.o.instances; i++ {
		in, err := startInstance(s.o.bin, env, filepath.Join(tmp, fmt.Sprint("data", i)))
		if err != nil {
			return err
		}
		s.insts = append(s.insts, in)
	}
	return nil
}

func (s *soak) stopInstances() {
	for _, in := range s.insts {
		_ = in.cmd.Process.Signal(os.Interrupt)
		_ = in.cmd.Wait()
	}
}

// connectClients starts every client and waits until each has its first
// ready frame.
func (s *soak) connectClients(ctx, cctx context.Context, cwg *sync.WaitGroup) error {
	s.clients = make([]*client, s.o.clients)
	s.connected = make(chan struct{}, s.o.clients)
	s.dialSlots = make(chan struct{}, 50)
	for i := range s.clients {
		c := &client{inst: i % s.o.instances}
		s.clients[i] = c
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			s.follow(cctx, c)
		}()
	}
	connectStart := time.Now()
	for i := 0; i < s.o.clients; i++ {
		select {
		case <-s.connected:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("only %d of %d clients connected after 2 minutes", i, s.o.clients)
		}
	}
	fmt.Printf("soak: %d clients connected in %s\n\n", s.o.clients, time.Since(connectStart).Round(time.Millisecond))
	return nil
}

// follow keeps client c connected until ctx ends, reconnecting after the
// last id it saw.
func (s *soak) follow(ctx context.Context, c *client) {
	first := true
	last := int64(0)
	for ctx.Err() == nil {
		s.dialSlots <- struct{}{}
		q := ""
		if !first {
			q = "?after=" + strconv.FormatInt(last, 10)
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		conn, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(s.insts[c.inst].url, "http")+"/api/ws"+q,
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + s.token}}})
		cancel()
		<-s.dialSlots
		if err != nil {
			if ctx.Err() == nil {
				s.count(func(w *window) { w.dialErrors++ })
				time.Sleep(500 * time.Millisecond)
			}
			continue
		}
		conn.SetReadLimit(1 << 20)
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				break
			}
			var f frame
			if json.Unmarshal(data, &f) != nil {
				continue
			}
			s.receive(c, f, time.Now(), &first, &last)
		}
		conn.CloseNow()
		if ctx.Err() == nil {
			s.count(func(w *window) { w.drops++ })
		}
	}
}

// count applies fn to the current window under its lock.
func (s *soak) count(fn func(w *window)) {
	w := s.cur.Load()
	w.mu.Lock()
	fn(w)
	w.mu.Unlock()
}

// receive records one frame client c got at now.
func (s *soak) receive(c *client, f frame, now time.Time, first *bool, last *int64) {
	switch f.Type {
	case "ready":
		if *first {
			c.start, *last, *first = f.LastID, f.LastID, false
			s.connected <- struct{}{}
		}
	case "message":
		m := f.Message
		if m.ID <= *last {
			s.count(func(w *window) { w.orderErrors++ })
			return
		}
		*last = m.ID
		c.ids = append(c.ids, m.ID)
		s.sentMu.Lock()
		t0, ok := s.sentAt[m.Content]
		var turn time.Duration
		dup := false
		if m.Role == "assistant" && m.Metadata.ReplyTo != 0 && c == s.clients[0] {
			if t, ok := s.idSent[m.Metadata.ReplyTo]; ok {
				dup = s.answered[m.Metadata.ReplyTo]
				s.answered[m.Metadata.ReplyTo] = true
				turn = now.Sub(t)
			}
		}
		s.sentMu.Unlock()
		s.count(func(w *window) {
			if dup {
				w.answersDup++
			}
			w.framesReceived++
			if ok && m.Role == "user" {
				w.delivery = append(w.delivery, now.Sub(t0))
			}
			if turn > 0 {
				w.turn = append(w.turn, turn)
				w.answersSeen++
			}
		})
	}
}

// post sends -rate messages per second until ctx ends.
func (s *soak) post(ctx context.Context, pwg *sync.WaitGroup) {
	defer pwg.Done()
	httpc := &http.Client{Timeout: 30 * time.Second}
	tick := time.NewTicker(time.Duration(float64(time.Second) / s.o.rate))
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pwg.Add(1)
		go func(n int) {
			defer pwg.Done()
			s.postOne(httpc, n)
		}(n)
	}
}

func (s *soak) postOne(httpc *http.Client, n int) {
	content := fmt.Sprintf("soak message %d", n)
	body, _ := json.Marshal(map[string]string{"content": content, "client_key": fmt.Sprint("soak-", n)})
	req, _ := http.NewRequest("POST", s.insts[n%len(s.insts)].url+"/api/messages", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	s.sentMu.Lock()
	s.sentAt[content] = t0
	s.sentMu.Unlock()
	resp, err := httpc.Do(req)
	if err != nil {
		s.count(func(w *window) { w.posts++; w.postErrors++ })
		return
	}
	var out struct {
		Message struct{ ID int64 } `json:"message"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	s.count(func(w *window) {
		w.posts++
		if resp.StatusCode != 201 {
			w.postErrors++
		}
		w.post = append(w.post, time.Since(t0))
	})
	s.sentMu.Lock()
	s.idSent[out.Message.ID] = t0
	s.sentMu.Unlock()
}

// reportUntil prints a table row every -interval until ctx ends.
func (s *soak) reportUntil(ctx context.Context) {
	fmt.Println("| t | posts | post errors | post p50/p99 ms | delivery p50/p95/p99/max ms | turn p50/p99 ms | ws drops | dial errors | order errors | per instance: RSS MiB, fds, goroutines |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	s.started = time.Now()
	ticker := time.NewTicker(s.o.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			s.report(time.Since(s.started))
		case <-ctx.Done():
			return
		}
	}
}

// report prints the current window's row and starts a new window.
func (s *soak) report(at time.Duration) {
	w := s.cur.Swap(&window{})
	time.Sleep(50 * time.Millisecond) // let writers of the old window finish
	w.mu.Lock()
	defer w.mu.Unlock()
	var per []string
	for _, in := range s.insts {
		rss, fds := procStatus(in.cmd.Process.Pid)
		per = append(per, fmt.Sprintf("%.0f, %d, %d", rss, fds, goroutines(in.url, s.token)))
	}
	fmt.Printf("| %s | %d | %d | %s / %s | %s / %s / %s / %s | %s / %s | %d | %d | %d | %s |\n",
		at.Round(time.Second), w.posts, w.postErrors, ms(pct(w.post, .5)), ms(pct(w.post, .99)),
		ms(pct(w.delivery, .5)), ms(pct(w.delivery, .95)), ms(pct(w.delivery, .99)), ms(pct(w.delivery, 1)),
		ms(pct(w.turn, .5)), ms(pct(w.turn, .99)), w.drops, w.dialErrors, w.orderErrors+w.answersDup, strings.Join(per, " · "))
}

// verify compares every client's ids with the timeline.
func (s *soak) verify(ctx context.Context, admin *pgx.Conn, schema string) error {
	rows, err := admin.Query(ctx, "SELECT id FROM "+schema+".chat_messages WHERE visible = 1 AND timeline_scope = 'global' ORDER BY id")
	if err != nil {
		return err
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	bad := 0
	for i, c := range s.clients {
		want := all[sort64(all, c.start):]
		got := c.ids
		for len(got) > 0 && len(want) > 0 && got[len(got)-1] > want[len(want)-1] {
			got = got[:len(got)-1]
		}
		if !slices.Equal(got, want) {
			bad++
			if bad <= 3 {
				fmt.Printf("client %d: received %d messages, the timeline has %d after id %d\n", i, len(got), len(want), c.start)
			}
		}
	}
	s.sentMu.Lock()
	unanswered := 0
	for id := range s.idSent {
		if !s.answered[id] {
			unanswered++
		}
	}
	s.sentMu.Unlock()
	fmt.Printf("\nsoak: %d messages in the timeline; %d of %d clients differ from it; %d questions without an answer seen by client 0\n",
		len(all), bad, len(s.clients), unanswered)
	if bad > 0 {
		return fmt.Errorf("%d clients missed or repeated messages", bad)
	}
	return nil
}

// sort64 is the index of the first id after start.
func sort64(ids []int64, start int64) int {
	i, _ := slices.BinarySearch(ids, start+1)
	return i
}
