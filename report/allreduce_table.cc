#include "report/allreduce_table.h"

#include <fstream>
#include <regex>
#include <sstream>

#include "core/check.h"
#include "core/parse_number.h"

namespace tandem::report {

namespace {

bool parse_number(const std::string& token, double& out) {
  const std::optional<double> v = parse_double(token);
  if (v) out = *v;
  return v.has_value();
}

}  // namespace

AllreduceTable parse_allreduce_table(const std::string& text, const std::string& path, int world_size) {
  AllreduceTable t;
  t.path = path;
  std::istringstream in(text);
  std::string line;
  int number = 0, header_world = 0;
  // "# tandem bench allreduce: all_reduce, backend ring (transport shm) (single copy from
  // 1048576 bytes), 3 ranks, ..." (the notes in brackets hold no comma); older tables name no
  // collective, transport or single copy.
  const std::regex header(R"(#\s*tandem bench allreduce:\s*(?:(\w+),\s*)?backend\s+([^\s,]+)[^,]*,\s*(\d+)\s+ranks)");
  while (std::getline(in, line)) {
    ++number;
    // `tandem launch --prefix-output` puts "[rank N] " before each line.
    if (line.rfind("[rank ", 0) == 0) {
      const size_t close = line.find("] ");
      if (close != std::string::npos) line = line.substr(close + 2);
    }
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    if (line[first] == '#') {
      std::smatch m;
      if (std::regex_search(line, m, header)) {
        TANDEM_CHECK(!m[1].matched || m[1] == "all_reduce",
                     "{}:{}: a {} table; the link is fitted from all_reduce times (run without --collective)", path,
                     number, m[1].str());
        t.backend = m[2];
        header_world = std::stoi(m[3]);
      }
      continue;
    }
    std::istringstream fields(line);
    std::vector<std::string> tok;
    for (std::string s; fields >> s;) tok.push_back(s);
    TANDEM_CHECK(tok.size() == 13,
                 "{}:{}: expected 13 columns (size count type redop root, then time algbw busbw #wrong out of place "
                 "and in place), got {}: '{}'",
                 path, number, tok.size(), line);
    AllreduceRow r;
    r.line = number;
    double wrong_oop = 0, wrong_ip = 0;
    TANDEM_CHECK(parse_number(tok[0], r.bytes) && parse_number(tok[5], r.out_of_place_us) &&
                     parse_number(tok[9], r.in_place_us) && parse_number(tok[8], wrong_oop) &&
                     parse_number(tok[12], wrong_ip),
                 "{}:{}: size and times must be numbers: '{}'", path, number, line);
    TANDEM_CHECK(r.bytes > 0 && r.out_of_place_us > 0 && r.in_place_us > 0,
                 "{}:{}: size and times must be positive: '{}'", path, number, line);
    TANDEM_CHECK(wrong_oop == 0 && wrong_ip == 0, "{}:{}: the run reported wrong results (#wrong {} and {})", path,
                 number, tok[8], tok[12]);
    t.rows.push_back(r);
  }
  TANDEM_CHECK(!t.rows.empty(), "{}: no table rows (is it the output of tandem bench allreduce?)", path);
  if (world_size > 0) {
    TANDEM_CHECK(header_world == 0 || header_world == world_size, "{}: given as {} ranks, but its header says {}", path,
                 world_size, header_world);
    t.world_size = world_size;
  } else {
    TANDEM_CHECK(header_world > 0,
                 "{}: no '# tandem bench allreduce: backend B, N ranks' header; give the world size as N=FILE", path);
    t.world_size = header_world;
  }
  return t;
}

AllreduceTable read_allreduce_table(const std::filesystem::path& path, int world_size) {
  std::ifstream in(path);
  TANDEM_CHECK(in.good(), "cannot read all_reduce table {}", path.string());
  std::stringstream s;
  s << in.rdbuf();
  return parse_allreduce_table(s.str(), path.string(), world_size);
}

}  // namespace tandem::report
