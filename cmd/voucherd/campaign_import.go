package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/voucherd/voucherd/client"
	"github.com/voucherd/voucherd/internal/voucher"
)

// importCodes streams the CSV file path ("-": stdin) into campaign id,
// batch codes per request: each line is `code` or `code,customerId`; a
// first line `code` or `code,customerId` is a header. A malformed line
// stops the import with its line number before its batch is sent, so
// nothing of that batch is written (the batches before it are: an import
// sent again adds nothing twice). Refused codes are printed to stdout with
// their line numbers, then a summary; a progress bar goes to stderr.
// Memory is bounded by one batch, whatever the file's size.
func importCodes(ctx context.Context, cl *client.Client, id, path string, batch int, stdout, stderr io.Writer) error {
	in := io.Reader(os.Stdin)
	var size int64
	if path != "-" {
		f, err := os.Open(path) //nolint:gosec // G304: the file the operator named on the command line
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }() // read only: closing cannot lose data
		if st, err := f.Stat(); err == nil {
			size = st.Size()
		}
		in = f
	}
	counted := &countingReader{r: in}
	r := csv.NewReader(counted)
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	bar := progressBar(stderr, size, time.Now())

	var (
		codes []client.ImportCode
		lines []int
		sum   client.ImportResult
		total int
	)
	send := func() error {
		if len(codes) == 0 {
			return nil
		}
		res, err := cl.ImportCampaignCodes(ctx, id, codes)
		if err != nil {
			return fmt.Errorf("%s lines %d-%d: nothing of them was written: %w", path, lines[0], lines[len(lines)-1], err)
		}
		for _, x := range res.Refused {
			fmt.Fprintf(stdout, "line %d: %s: %s\n", lines[x.Index], x.Code, x.Reason)
		}
		sum.Added += res.Added
		sum.Existing += res.Existing
		sum.Refused = append(sum.Refused, res.Refused...)
		total += len(codes)
		codes, lines = codes[:0], lines[:0]
		bar(counted.n, total, false)
		return nil
	}
	for first := true; ; first = false {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A csv.ParseError names its line.
			return fmt.Errorf("%s: %w; %s", path, err, unsent(lines))
		}
		line, _ := r.FieldPos(0)
		if first && strings.EqualFold(rec[0], "code") {
			continue
		}
		c, err := importLine(rec)
		if err != nil {
			return fmt.Errorf("%s line %d: %w; %s", path, line, err, unsent(lines))
		}
		codes = append(codes, c)
		lines = append(lines, line)
		if len(codes) == batch {
			if err := send(); err != nil {
				return err
			}
		}
	}
	if err := send(); err != nil {
		return err
	}
	bar(counted.n, total, true)
	fmt.Fprintf(stdout, "%d codes: %d added, %d there already, %d refused\n", total, sum.Added, sum.Existing, len(sum.Refused))
	return nil
}

// unsent says which lines of the batch being read were not sent.
func unsent(lines []int) string {
	if len(lines) == 0 {
		return "its batch was not sent"
	}
	return fmt.Sprintf("lines %d and on were not sent (nor any earlier line of their batch)", lines[0])
}

// importLine reads one CSV record as a code, checked as the server checks
// it, so that a malformed line is found before its batch is sent.
func importLine(rec []string) (client.ImportCode, error) {
	if len(rec) > 2 {
		return client.ImportCode{}, fmt.Errorf("%d fields; want code or code,customerId", len(rec))
	}
	c := client.ImportCode{Code: strings.TrimSpace(rec[0])}
	if len(rec) == 2 {
		c.CustomerID = strings.TrimSpace(rec[1])
	}
	switch {
	case !voucher.ValidCode(c.Code):
		return c, fmt.Errorf("code %q must be 1-32 characters of A-Z a-z 0-9 _ -", c.Code)
	case c.CustomerID != "" && !voucher.ValidCustomerID(c.CustomerID):
		return c, fmt.Errorf("customerId %q must be 1-64 characters of A-Z a-z 0-9 . _ : - @ +", c.CustomerID)
	}
	return c, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// progressBar returns a function that redraws one line on w: the share of
// the file's size read (a bar when size is known), the codes sent and the
// time since start; done ends the line.
func progressBar(w io.Writer, size int64, start time.Time) func(read int64, codes int, done bool) {
	const width = 30
	return func(read int64, codes int, done bool) {
		bar := ""
		if size > 0 {
			filled := int(min(read, size) * width / size)
			bar = fmt.Sprintf("[%s%s] %3d%% ", strings.Repeat("#", filled), strings.Repeat(".", width-filled), min(read, size)*100/size)
		}
		end := ""
		if done {
			end = "\n"
		}
		fmt.Fprintf(w, "\rimport: %s%d codes in %.1f s%s", bar, codes, time.Since(start).Seconds(), end)
	}
}
