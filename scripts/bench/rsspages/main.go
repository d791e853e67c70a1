// Command rsspages shows which parts of a running Go binary are resident:
// it reads the process's page table (/proc/PID/pagemap, present bit; no
// privileges needed for one's own processes) over the mappings of the
// binary and charges each resident page to the symbol at its middle
// (go tool nm), grouped by package or by kind of read-only data (type:,
// runtime.pclntab, go:string., go:func.). The kernel maps ~64 KiB around
// every page a process touches, so a group's size says how scattered the
// touches were as much as how much was read.
//
// Reading the symbols reads the whole executable, which can leave it in
// the page cache as large folios that later starts map 2 MiB at a time
// (~8 MiB more idle RSS measured): give -bin a copy of the executable, or
// measure with a fresh copy afterwards (run.sh does).
//
//	go run ./scripts/bench/rsspages -pid $(pgrep -n switchboard) -bin ./switchboard
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type symbol struct {
	addr, size uint64
	name       string
}

func main() {
	pid := flag.Int("pid", 0, "process id")
	bin := flag.String("bin", "", "the process's executable (for its symbols)")
	top := flag.Int("top", 40, "groups to print")
	flag.Parse()
	if *pid == 0 || *bin == "" {
		fmt.Fprintln(os.Stderr, "rsspages: -pid and -bin are required")
		os.Exit(2)
	}
	syms, err := symbols(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rsspages:", err)
		os.Exit(1)
	}
	groups, total, err := resident(*pid, filepath.Base(*bin), syms)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rsspages:", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Slice(names, func(i, j int) bool { return groups[names[i]] > groups[names[j]] })
	fmt.Printf("resident %.1f MiB of the binary's mappings\n", mib(total))
	for i, g := range names {
		if i == *top {
			break
		}
		fmt.Printf("%7.2f MiB  %s\n", mib(groups[g]), g)
	}
}

func mib(pages int) float64 { return float64(pages) * float64(os.Getpagesize()) / (1 << 20) }

// symbols returns the binary's symbols sorted by address.
func symbols(bin string) ([]symbol, error) {
	out, err := exec.Command("go", "tool", "nm", "-size", "-sort", "address", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool nm %s: %w", bin, err)
	}
	var syms []symbol
	for l := range strings.SplitSeq(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		a, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		s, _ := strconv.ParseUint(f[1], 10, 64)
		syms = append(syms, symbol{a, s, strings.Join(f[3:], " ")})
	}
	sort.Slice(syms, func(i, j int) bool { return syms[i].addr < syms[j].addr })
	return syms, nil
}

// resident counts the present pages of the mappings of the file named
// base, by group ("perms group").
func resident(pid int, base string, syms []symbol) (map[string]int, int, error) {
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, 0, err
	}
	defer maps.Close()
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, 0, err
	}
	defer pm.Close()
	page := uint64(os.Getpagesize())
	groups, total := map[string]int{}, 0
	buf := make([]byte, 8)
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || filepath.Base(f[5]) != base {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		end, _ := strconv.ParseUint(hi, 16, 64)
		for a := start; a < end; a += page {
			if _, err := pm.ReadAt(buf, int64(a/page*8)); err != nil {
				return nil, 0, fmt.Errorf("pagemap: %w", err)
			}
			if binary.LittleEndian.Uint64(buf)&(1<<63) == 0 {
				continue
			}
			total++
			groups[f[1]+" "+groupAt(syms, a+page/2)]++
		}
	}
	return groups, total, sc.Err()
}

func groupAt(syms []symbol, addr uint64) string {
	i := sort.Search(len(syms), func(i int) bool { return syms[i].addr > addr }) - 1
	if i < 0 {
		return "?"
	}
	g := group(syms[i].name)
	if s := syms[i]; s.size > 0 && addr >= s.addr+s.size {
		return "after " + g
	}
	return g
}

// group is the kind of data and package of a symbol name.
func group(name string) string {
	for _, kind := range []string{"type:", "go:string.", "go:itab.", "go:func.", "runtime.pclntab", "runtime.rodata"} {
		if rest, ok := strings.CutPrefix(name, kind); ok {
			return kind + pkg(strings.TrimLeft(rest, "*[]"))
		}
	}
	return pkg(name)
}

// pkg is the module-ish prefix of a symbol: the import path for the
// standard library, owner/repo for github.com.
func pkg(name string) string {
	slash := strings.LastIndex(name, "/")
	dot := strings.Index(name[slash+1:], ".")
	if dot < 0 {
		return name
	}
	p := name[:slash+1+dot]
	if parts := strings.Split(p, "/"); len(parts) > 3 && (parts[0] == "github.com" || parts[0] == "golang.org") {
		return strings.Join(parts[:3], "/")
	}
	return p
}
