// A fast S3 server for bench/remote.py: gofakes3 holding a local directory's files in memory, on
// loopback, optionally waiting before every answer (a remote store's time to the first byte).
//
// A Python server (moto) on the benchmark's machine shares its cores with the command measured; a
// user's S3 costs the user's machine nothing. This one serves the same requests (GET with Range, HEAD,
// list-objects-v2) for a fraction of the CPU. Bench only: neither the package nor the tests need it.
//
//	go build -o s3server . && ./s3server -load DIR -bucket B -prefix job -latency 30ms
//
// It listens on two loopback ports sharing one store: "plain" answers at once, "delayed" waits
// -latency before each answer. Its first line of output is JSON: {"plain": PORT, "delayed": PORT}.
// GET /_bench/requests (either port) answers the requests served so far by method and path (the
// bucket and key, without the query), how many at most were served at once, and this process's CPU
// seconds; it is not counted itself.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

type counter struct {
	mu          sync.Mutex
	byObject    map[string]int // "METHOD /bucket/key"
	total       int
	inFlight    int
	maxInFlight int
}

func (c *counter) enter(r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byObject[r.Method+" "+r.URL.Path]++
	c.total++
	c.inFlight++
	if c.inFlight > c.maxInFlight {
		c.maxInFlight = c.inFlight
	}
}

func (c *counter) leave() {
	c.mu.Lock()
	c.inFlight--
	c.mu.Unlock()
}

func (c *counter) report(w http.ResponseWriter) {
	var usage syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	cpu := time.Duration(usage.Utime.Nano() + usage.Stime.Nano()).Seconds()
	c.mu.Lock()
	body, _ := json.Marshal(map[string]any{"requests": c.byObject, "total": c.total, "max_in_flight": c.maxInFlight,
		"cpu_seconds": cpu})
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func handler(s3 http.Handler, c *counter, latency time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_bench/requests" {
			c.report(w)
			return
		}
		c.enter(r)
		defer c.leave()
		if latency > 0 {
			time.Sleep(latency)
		}
		s3.ServeHTTP(w, r)
	})
}

func load(backend *s3mem.Backend, dir, bucket, prefix string) error {
	if err := backend.CreateBucket(bucket); err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(path string, entry fs.DirEntry, err error) error {
		if err != nil || entry.IsDir() {
			return err
		}
		relative, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		file, err := os.Open(path)
		if err != nil {
			return err
		}
		defer file.Close()
		info, err := file.Stat()
		if err != nil {
			return err
		}
		key := prefix + "/" + filepath.ToSlash(relative)
		_, err = backend.PutObject(bucket, key, map[string]string{}, file, info.Size(), nil)
		return err
	})
}

func listen(h http.Handler) (int, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	go http.Serve(listener, h)
	return listener.Addr().(*net.TCPAddr).Port, nil
}

func main() {
	dir := flag.String("load", "", "a local directory whose files the store holds")
	bucket := flag.String("bucket", "bench", "the bucket holding them")
	prefix := flag.String("prefix", "job", "the key prefix of the files")
	latency := flag.Duration("latency", 30*time.Millisecond, "wait before each answer of the delayed port")
	flag.Parse()

	backend := s3mem.New()
	if *dir != "" {
		if err := load(backend, *dir, *bucket, *prefix); err != nil {
			log.Fatal(err)
		}
	}
	s3 := gofakes3.New(backend, gofakes3.WithoutVersioning()).Server()
	c := &counter{byObject: map[string]int{}}
	plain, err := listen(handler(s3, c, 0))
	if err != nil {
		log.Fatal(err)
	}
	delayed, err := listen(handler(s3, c, *latency))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("{\"plain\": %d, \"delayed\": %d}\n", plain, delayed)
	os.Stdout.Sync()
	select {}
}
