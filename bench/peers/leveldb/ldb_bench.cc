// ldb_bench: a small db_bench-compatible driver for LevelDB, so that
// bench/peers/leveldb.sh can run the same command line on LevelDB and on
// `lamina bench`.
//
// Flags (db_bench spelling, --name=value or --name value): --benchmarks
// (fillseq, fillrandom, overwrite, readrandom, readseq, readreverse,
// seekrandom, deleterandom, stats), --num, --reads, --key_size,
// --value_size, --write_buffer_size, --bloom_bits, --cache_size,
// --block_size, --threads, --sync, --db, --use_existing_db, --seed,
// --seek_nexts; --compression_type (none only) and --disable_wal (LevelDB
// always logs) are accepted for compatibility.
//
// Keys and output follow db_bench and lamina bench: the key of integer k is
// k's low min(key_size, 8) bytes big-endian padded with '0'; random keys
// are rng() % num from a generator seeded with seed + (threads started so
// far); each line reads "name : X micros/op Y ops/sec; Z MB/s (msg)".
//
// Build: g++ -O2 -std=c++17 -o ldb_bench ldb_bench.cc -lleveldb -lpthread

#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Flags {
  std::string benchmarks = "fillrandom,readrandom";
  uint64_t num = 1000000;
  int64_t reads = -1;
  size_t key_size = 16;
  size_t value_size = 100;
  size_t write_buffer_size = 64 << 20;
  int bloom_bits = 10;
  size_t cache_size = 8 << 20;
  size_t block_size = 4096;
  int threads = 1;
  bool sync = false;
  std::string db = "/tmp/ldb-bench";
  bool use_existing_db = false;
  uint64_t seed = 301;
  uint64_t seek_nexts = 0;
};

bool ParseBool(const std::string& v) {
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "ldb_bench: %s\n", msg.c_str());
  std::exit(1);
}

uint64_t ParseU64(const std::string& name, const std::string& v) {
  char* end = nullptr;
  unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') Die("--" + name + ": not a number: " + v);
  return x;
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) Die("unexpected argument " + arg);
    arg = arg.substr(2);
    std::string name = arg, value;
    size_t eq = arg.find('=');
    bool has_value = eq != std::string::npos;
    if (has_value) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    bool is_bool = name == "sync" || name == "use_existing_db" || name == "disable_wal";
    if (!has_value) {
      if (is_bool && (i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0)) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        Die("--" + name + " needs a value");
      }
    }
    if (name == "benchmarks") f.benchmarks = value;
    else if (name == "num") f.num = ParseU64(name, value);
    else if (name == "reads") f.reads = static_cast<int64_t>(ParseU64(name, value));
    else if (name == "key_size") f.key_size = ParseU64(name, value);
    else if (name == "value_size") f.value_size = ParseU64(name, value);
    else if (name == "write_buffer_size") f.write_buffer_size = ParseU64(name, value);
    else if (name == "bloom_bits") f.bloom_bits = static_cast<int>(ParseU64(name, value));
    else if (name == "cache_size") f.cache_size = ParseU64(name, value);
    else if (name == "block_size") f.block_size = ParseU64(name, value);
    else if (name == "threads") f.threads = static_cast<int>(ParseU64(name, value));
    else if (name == "sync") f.sync = ParseBool(value);
    else if (name == "db") f.db = value;
    else if (name == "use_existing_db") f.use_existing_db = ParseBool(value);
    else if (name == "seed") f.seed = ParseU64(name, value);
    else if (name == "seek_nexts") f.seek_nexts = ParseU64(name, value);
    else if (name == "compression_type") {
      if (value != "none") std::fprintf(stderr, "WARNING: only --compression_type=none is used\n");
    } else if (name == "disable_wal") {
      if (ParseBool(value)) std::fprintf(stderr, "WARNING: --disable_wal is ignored: LevelDB always logs\n");
    } else {
      Die("unknown flag --" + name);
    }
  }
  if (f.num == 0) Die("--num must be at least 1");
  if (f.key_size == 0) Die("--key_size must be at least 1");
  if (f.threads < 1) Die("--threads must be at least 1");
  if (f.reads < 0) f.reads = static_cast<int64_t>(f.num);
  return f;
}

using Clock = std::chrono::steady_clock;

struct ThreadStats {
  uint64_t ops = 0, bytes = 0, found = 0;
  Clock::time_point start, finish;
};

void EncodeKey(std::string* key, uint64_t v) {
  size_t n = std::min<size_t>(key->size(), 8);
  for (size_t i = 0; i < n; i++) (*key)[i] = static_cast<char>(v >> ((n - i - 1) * 8));
}

class Bench {
 public:
  explicit Bench(const Flags& f) : f_(f) {
    std::mt19937_64 rng(f.seed ^ 0x9e3779b97f4a7c15ULL);
    pool_.resize(std::max<size_t>(1 << 20, f.value_size));
    for (auto& c : pool_) c = static_cast<char>(rng());
    leveldb::Options o;
    o.create_if_missing = true;
    o.write_buffer_size = f.write_buffer_size;
    o.block_size = f.block_size;
    o.compression = leveldb::kNoCompression;
    cache_.reset(leveldb::NewLRUCache(f.cache_size));
    o.block_cache = cache_.get();
    if (f.bloom_bits > 0) {
      filter_.reset(leveldb::NewBloomFilterPolicy(f.bloom_bits));
      o.filter_policy = filter_.get();
    }
    if (!f.use_existing_db) leveldb::DestroyDB(f.db, o);
    leveldb::DB* db = nullptr;
    leveldb::Status s = leveldb::DB::Open(o, f.db, &db);
    if (!s.ok()) Die("opening " + f.db + ": " + s.ToString());
    db_.reset(db);
  }

  void Run(const std::string& name) {
    if (name == "stats") {
      std::string stats;
      db_->GetProperty("leveldb.stats", &stats);
      std::printf("%s\n", stats.c_str());
      return;
    }
    bool show_found = name == "readrandom" || name == "seekrandom";
    std::vector<ThreadStats> stats(f_.threads);
    std::vector<std::thread> threads;
    std::atomic<int> ready{0};
    for (int t = 0; t < f_.threads; t++) {
      uint64_t seed = f_.seed + started_++;
      threads.emplace_back([&, t, seed] {
        ready.fetch_add(1);
        while (ready.load() < f_.threads) std::this_thread::yield();
        stats[t] = Work(name, t, seed);
      });
    }
    for (auto& th : threads) th.join();
    Report(name, stats, show_found);
  }

 private:
  ThreadStats Work(const std::string& name, int tid, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::string key(f_.key_size, '0');
    ThreadStats st;
    st.start = Clock::now();
    size_t vpos = (static_cast<size_t>(tid) * 4099) % pool_.size();
    auto next_value = [&]() {
      if (vpos + f_.value_size > pool_.size()) vpos = 0;
      leveldb::Slice v(pool_.data() + vpos, f_.value_size);
      vpos += f_.value_size;
      return v;
    };
    leveldb::WriteOptions wo;
    wo.sync = f_.sync;
    leveldb::ReadOptions ro;
    uint64_t reads = static_cast<uint64_t>(f_.reads);
    if (name == "fillseq" || name == "fillrandom" || name == "overwrite") {
      bool random = name != "fillseq";
      for (uint64_t i = 0; i < f_.num; i++) {
        EncodeKey(&key, random ? rng() % f_.num : i);
        Check(db_->Put(wo, key, next_value()));
      }
      st.ops = f_.num;
      st.bytes = f_.num * (f_.key_size + f_.value_size);
    } else if (name == "deleterandom") {
      for (uint64_t i = 0; i < f_.num; i++) {
        EncodeKey(&key, rng() % f_.num);
        Check(db_->Delete(wo, key));
      }
      st.ops = f_.num;
    } else if (name == "readrandom") {
      std::string value;
      for (uint64_t i = 0; i < reads; i++) {
        EncodeKey(&key, rng() % f_.num);
        leveldb::Status s = db_->Get(ro, key, &value);
        if (s.ok()) {
          st.found++;
          st.bytes += key.size() + value.size();
        } else if (!s.IsNotFound()) {
          Check(s);
        }
      }
      st.ops = reads;
    } else if (name == "seekrandom") {
      for (uint64_t i = 0; i < reads; i++) {
        EncodeKey(&key, rng() % f_.num);
        std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ro));
        it->Seek(key);
        if (it->Valid() && it->key() == leveldb::Slice(key)) st.found++;
        for (uint64_t j = 0; j < f_.seek_nexts && it->Valid(); j++) {
          st.bytes += it->key().size() + it->value().size();
          it->Next();
        }
        Check(it->status());
      }
      st.ops = reads;
    } else if (name == "readseq" || name == "readreverse") {
      std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ro));
      bool forward = name == "readseq";
      if (forward) it->SeekToFirst(); else it->SeekToLast();
      while (it->Valid() && st.ops < reads) {
        st.bytes += it->key().size() + it->value().size();
        st.ops++;
        if (forward) it->Next(); else it->Prev();
      }
      Check(it->status());
    } else {
      Die("unknown benchmark " + name);
    }
    st.finish = Clock::now();
    return st;
  }

  static void Check(const leveldb::Status& s) {
    if (!s.ok()) Die(s.ToString());
  }

  static void Report(const std::string& name, const std::vector<ThreadStats>& stats,
                     bool show_found) {
    uint64_t ops = 0, bytes = 0, found = 0;
    double thread_secs = 0;
    auto first = stats[0].start, last = stats[0].finish;
    for (const auto& s : stats) {
      ops += s.ops;
      bytes += s.bytes;
      found += s.found;
      thread_secs += std::chrono::duration<double>(s.finish - s.start).count();
      first = std::min(first, s.start);
      last = std::max(last, s.finish);
    }
    double wall = std::max(std::chrono::duration<double>(last - first).count(), 1e-9);
    uint64_t done = std::max<uint64_t>(ops, 1);
    std::ostringstream extra;
    char buf[64];
    if (bytes > 0) {
      std::snprintf(buf, sizeof buf, "%6.1f MB/s", bytes / 1048576.0 / wall);
      extra << buf;
    }
    if (show_found) {
      if (bytes > 0) extra << ' ';
      extra << '(' << found << " of " << ops << " found)";
    }
    std::string e = extra.str();
    std::printf("%-12s : %11.3f micros/op %llu ops/sec;%s%s\n", name.c_str(),
                thread_secs * 1e6 / done, static_cast<unsigned long long>(done / wall),
                e.empty() ? "" : " ", e.c_str());
    std::fflush(stdout);
  }

  Flags f_;
  std::string pool_;
  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_;
  std::unique_ptr<leveldb::DB> db_;
  uint64_t started_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Flags f = ParseFlags(argc, argv);
  std::printf("LevelDB:    version %d.%d\n", leveldb::kMajorVersion, leveldb::kMinorVersion);
  std::printf("Keys:       %zu bytes each\nValues:     %zu bytes each\nEntries:    %llu\n",
              f.key_size, f.value_size, static_cast<unsigned long long>(f.num));
  std::printf("------------------------------------------------\n");
  Bench bench(f);
  std::stringstream list(f.benchmarks);
  std::string name;
  while (std::getline(list, name, ',')) {
    if (!name.empty()) bench.Run(name);
  }
  return 0;
}
