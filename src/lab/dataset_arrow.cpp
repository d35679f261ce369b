// liblathe_dataset.so: LabRows to and from Parquet with Apache Arrow C++ (docs/dataset.md
// lists the columns). Loaded by src/lab/dataset.cpp through the table in lab/dataset_plugin.h;
// nothing else in lathe includes an Arrow header.
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/writer.h>

#include <ctime>
#include <filesystem>
#include <map>
#include <variant>

#include "core/error.h"
#include "lab/dataset_plugin.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

using Stages = std::vector<std::pair<std::string, double>>;
using Strings = std::map<std::string, std::string>;
// A LabRow field, by the kind of column it becomes.
using Member =
    std::variant<std::string LabRow::*, std::optional<std::string> LabRow::*, int32_t LabRow::*,
                 std::optional<int32_t> LabRow::*, int64_t LabRow::*, double LabRow::*,
                 std::optional<double> LabRow::*, std::vector<int32_t> LabRow::*,
                 std::vector<std::string> LabRow::*, Stages LabRow::*, Strings LabRow::*>;

struct Column {
  const char* name;
  Member member;
  bool timestamp = false;  // a std::string member stored as timestamp[us, UTC]
};

// The dataset's columns, in file order (docs/dataset.md lists them with their meaning).
const std::vector<Column>& columns() {
  static const std::vector<Column> cols = {
      {"model_id", &LabRow::model_id},
      {"revision", &LabRow::revision},
      {"task", &LabRow::task},
      {"device_kind", &LabRow::device_kind},
      {"dtype", &LabRow::dtype},
      {"architecture", &LabRow::architecture},
      {"source", &LabRow::source},
      {"status", &LabRow::status},
      {"stage", &LabRow::stage},
      {"error_type", &LabRow::error_type},
      {"error_message", &LabRow::error_message},
      {"log_tail", &LabRow::log_tail},
      {"signal", &LabRow::signal},
      {"exit_code", &LabRow::exit_code},
      {"cores", &LabRow::cores},
      {"tp_degree", &LabRow::tp_degree},
      {"ep_degree", &LabRow::ep_degree},
      {"peak_memory_bytes", &LabRow::peak_memory_bytes},
      {"memory_limit_bytes", &LabRow::memory_limit_bytes},
      {"timeout_seconds", &LabRow::timeout_seconds},
      {"parameters", &LabRow::parameters},
      {"weight_bytes", &LabRow::weight_bytes},
      {"stage_seconds", &LabRow::stage_seconds},
      {"compile_seconds", &LabRow::compile_seconds},
      {"total_seconds", &LabRow::total_seconds},
      {"tokens_per_second", &LabRow::tokens_per_second},
      {"reference_source", &LabRow::reference_source},
      {"prompt_ids", &LabRow::prompt_ids},
      {"reference_tokens", &LabRow::reference_tokens},
      {"generated_tokens", &LabRow::generated_tokens},
      {"first_mismatch", &LabRow::first_mismatch},
      {"logits_nmse", &LabRow::logits_nmse},
      {"logits_max_abs_error", &LabRow::logits_max_abs_error},
      {"top1_agreement", &LabRow::top1_agreement},
      {"decode_logits_nmse", &LabRow::decode_logits_nmse},
      {"decode_first_diverging_step", &LabRow::decode_first_diverging_step},
      {"first_diverging_layer", &LabRow::first_diverging_layer},
      {"judge_verdict", &LabRow::judge_verdict},
      {"fluency_verdict", &LabRow::fluency_verdict},
      {"lathe_version", &LabRow::lathe_version},
      {"lathe_commit", &LabRow::lathe_commit},
      {"transformers_version", &LabRow::transformers_version},
      {"torch_version", &LabRow::torch_version},
      {"stack", &LabRow::stack},
      {"extra_packages", &LabRow::extra_packages},
      {"run_script", &LabRow::run_script},
      {"reference_script", &LabRow::reference_script},
      {"compile_cache_key", &LabRow::compile_cache_key},
      {"compile_cache_fetch", &LabRow::compile_cache_fetch},
      {"catalog_snapshot", &LabRow::catalog_snapshot},
      {"started_at", &LabRow::started_at, true},
      {"finished_at", &LabRow::finished_at, true},
      {"host", &LabRow::host},
  };
  return cols;
}

void check(const arrow::Status& s, const fs::path& file) {
  if (!s.ok()) fail(file.string(), ": ", s.ToString());
}
template <class T>
T check(arrow::Result<T> r, const fs::path& file) {
  if (!r.ok()) fail(file.string(), ": ", r.status().ToString());
  return std::move(r).ValueUnsafe();
}

std::shared_ptr<arrow::DataType> stage_type() {
  return arrow::struct_(
      {arrow::field("stage", arrow::utf8()), arrow::field("seconds", arrow::float64())});
}

std::shared_ptr<arrow::DataType> type_of(const Column& c) {
  struct {
    bool ts;
    std::shared_ptr<arrow::DataType> operator()(std::string LabRow::*) const {
      return ts ? arrow::timestamp(arrow::TimeUnit::MICRO, "UTC") : arrow::utf8();
    }
    std::shared_ptr<arrow::DataType> operator()(std::optional<std::string> LabRow::*) const {
      return arrow::utf8();
    }
    std::shared_ptr<arrow::DataType> operator()(int32_t LabRow::*) const { return arrow::int32(); }
    std::shared_ptr<arrow::DataType> operator()(std::optional<int32_t> LabRow::*) const {
      return arrow::int32();
    }
    std::shared_ptr<arrow::DataType> operator()(int64_t LabRow::*) const { return arrow::int64(); }
    std::shared_ptr<arrow::DataType> operator()(double LabRow::*) const { return arrow::float64(); }
    std::shared_ptr<arrow::DataType> operator()(std::optional<double> LabRow::*) const {
      return arrow::float64();
    }
    std::shared_ptr<arrow::DataType> operator()(std::vector<int32_t> LabRow::*) const {
      return arrow::list(arrow::int32());
    }
    std::shared_ptr<arrow::DataType> operator()(std::vector<std::string> LabRow::*) const {
      return arrow::list(arrow::utf8());
    }
    std::shared_ptr<arrow::DataType> operator()(Stages LabRow::*) const {
      return arrow::list(stage_type());
    }
    std::shared_ptr<arrow::DataType> operator()(Strings LabRow::*) const {
      return arrow::map(arrow::utf8(), arrow::utf8());
    }
  } visitor{c.timestamp};
  return std::visit(visitor, c.member);
}

// "2026-11-30T06:01:02.123456Z" as microseconds since the epoch (format_utc, lab/row.h, back).
int64_t parse_utc(const std::string& s) {
  std::tm tm{};
  int year = 0, month = 0, day = 0, h = 0, m = 0, sec = 0;
  long us = 0;
  if (std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d.%6ldZ", &year, &month, &day, &h, &m, &sec, &us) < 6)
    return 0;
  // Out of ISO 8601's range the seconds times 10^6 would overflow int64 (a row's text is
  // input: journals and result files).
  if (year < 1 || year > 9999 || month < 1 || month > 12 || day < 1 || day > 31 || h < 0 ||
      h > 23 || m < 0 || m > 59 || sec < 0 || sec > 60 || us < 0)
    return 0;
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = sec;
  return static_cast<int64_t>(timegm(&tm)) * 1000000 + us;
}

std::shared_ptr<arrow::Array> build_column(const Column& c, const std::vector<LabRow>& rows,
                                           const fs::path& file) {
  std::unique_ptr<arrow::ArrayBuilder> builder =
      check(arrow::MakeBuilder(type_of(c), arrow::default_memory_pool()), file);
  arrow::ArrayBuilder* b = builder.get();
  for (const LabRow& row : rows) {
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(row.*member)>;
          const T& v = row.*member;
          if constexpr (std::is_same_v<T, std::string>) {
            // Cast only when it is one: casting a StringBuilder is undefined (UBSan's vptr check).
            if (c.timestamp) {
              auto* tb = static_cast<arrow::TimestampBuilder*>(b);
              check(v.empty() ? tb->AppendNull() : tb->Append(parse_utc(v)), file);
            } else {
              check(static_cast<arrow::StringBuilder*>(b)->Append(v), file);
            }
          } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
            auto* sb = static_cast<arrow::StringBuilder*>(b);
            check(v ? sb->Append(*v) : sb->AppendNull(), file);
          } else if constexpr (std::is_same_v<T, int32_t>) {
            check(static_cast<arrow::Int32Builder*>(b)->Append(v), file);
          } else if constexpr (std::is_same_v<T, std::optional<int32_t>>) {
            auto* ib = static_cast<arrow::Int32Builder*>(b);
            check(v ? ib->Append(*v) : ib->AppendNull(), file);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            check(static_cast<arrow::Int64Builder*>(b)->Append(v), file);
          } else if constexpr (std::is_same_v<T, double>) {
            check(static_cast<arrow::DoubleBuilder*>(b)->Append(v), file);
          } else if constexpr (std::is_same_v<T, std::optional<double>>) {
            auto* db = static_cast<arrow::DoubleBuilder*>(b);
            check(v ? db->Append(*v) : db->AppendNull(), file);
          } else if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
            auto* lb = static_cast<arrow::ListBuilder*>(b);
            check(lb->Append(), file);
            check(static_cast<arrow::Int32Builder*>(lb->value_builder())->AppendValues(v), file);
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            auto* lb = static_cast<arrow::ListBuilder*>(b);
            check(lb->Append(), file);
            check(static_cast<arrow::StringBuilder*>(lb->value_builder())->AppendValues(v), file);
          } else if constexpr (std::is_same_v<T, Stages>) {
            auto* lb = static_cast<arrow::ListBuilder*>(b);
            auto* sb = static_cast<arrow::StructBuilder*>(lb->value_builder());
            check(lb->Append(), file);
            for (const auto& [stage, seconds] : v) {
              check(sb->Append(), file);
              check(static_cast<arrow::StringBuilder*>(sb->field_builder(0))->Append(stage), file);
              check(static_cast<arrow::DoubleBuilder*>(sb->field_builder(1))->Append(seconds),
                    file);
            }
          } else {
            static_assert(std::is_same_v<T, Strings>);
            auto* mb = static_cast<arrow::MapBuilder*>(b);
            check(mb->Append(), file);
            for (const auto& [k, x] : v) {
              check(static_cast<arrow::StringBuilder*>(mb->key_builder())->Append(k), file);
              check(static_cast<arrow::StringBuilder*>(mb->item_builder())->Append(x), file);
            }
          }
        },
        c.member);
  }
  std::shared_ptr<arrow::Array> out;
  check(builder->Finish(&out), file);
  return out;
}

void read_column(const Column& c, const arrow::Array& a, std::vector<LabRow>& rows,
                 const fs::path& file) {
  if (!a.type()->Equals(*type_of(c)))
    fail(file.string(), ": column \"", c.name, "\" has type ", a.type()->ToString(), ", expected ",
         type_of(c)->ToString());
  for (int64_t i = 0; i < a.length(); ++i) {
    LabRow& row = rows[static_cast<size_t>(i)];
    const bool null = a.IsNull(i);
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(row.*member)>;
          T& v = row.*member;
          if (null) return;
          if constexpr (std::is_same_v<T, std::string> ||
                        std::is_same_v<T, std::optional<std::string>>) {
            if (c.timestamp)
              v = format_utc(static_cast<const arrow::TimestampArray&>(a).Value(i));
            else
              v = static_cast<const arrow::StringArray&>(a).GetString(i);
          } else if constexpr (std::is_same_v<T, int32_t> ||
                               std::is_same_v<T, std::optional<int32_t>>) {
            v = static_cast<const arrow::Int32Array&>(a).Value(i);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            v = static_cast<const arrow::Int64Array&>(a).Value(i);
          } else if constexpr (std::is_same_v<T, double> ||
                               std::is_same_v<T, std::optional<double>>) {
            v = static_cast<const arrow::DoubleArray&>(a).Value(i);
          } else if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
            const auto& l = static_cast<const arrow::ListArray&>(a);
            const auto& vals = static_cast<const arrow::Int32Array&>(*l.values());
            for (int64_t k = l.value_offset(i); k < l.value_offset(i) + l.value_length(i); ++k)
              v.push_back(vals.Value(k));
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            const auto& l = static_cast<const arrow::ListArray&>(a);
            const auto& vals = static_cast<const arrow::StringArray&>(*l.values());
            for (int64_t k = l.value_offset(i); k < l.value_offset(i) + l.value_length(i); ++k)
              v.push_back(vals.GetString(k));
          } else if constexpr (std::is_same_v<T, Stages>) {
            const auto& l = static_cast<const arrow::ListArray&>(a);
            const auto& s = static_cast<const arrow::StructArray&>(*l.values());
            const auto& names = static_cast<const arrow::StringArray&>(*s.field(0));
            const auto& secs = static_cast<const arrow::DoubleArray&>(*s.field(1));
            for (int64_t k = l.value_offset(i); k < l.value_offset(i) + l.value_length(i); ++k)
              v.emplace_back(names.GetString(k), secs.Value(k));
          } else {
            const auto& m = static_cast<const arrow::MapArray&>(a);
            const auto& keys = static_cast<const arrow::StringArray&>(*m.keys());
            const auto& items = static_cast<const arrow::StringArray&>(*m.items());
            for (int64_t k = m.value_offset(i); k < m.value_offset(i) + m.value_length(i); ++k)
              v[keys.GetString(k)] = items.GetString(k);
          }
        },
        c.member);
  }
}

void write_table(const std::vector<LabRow>& rows, const std::string& path, const fs::path& file) {
  arrow::FieldVector fields;
  arrow::ArrayVector arrays;
  for (const auto& c : columns()) {
    fields.push_back(arrow::field(c.name, type_of(c)));
    arrays.push_back(build_column(c, rows, file));
  }
  const auto table =
      arrow::Table::Make(arrow::schema(fields), arrays, static_cast<int64_t>(rows.size()));
  auto out = check(arrow::io::FileOutputStream::Open(path), file);
  auto props =
      parquet::WriterProperties::Builder().compression(parquet::Compression::ZSTD)->build();
  check(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), out, 4096, props), file);
  check(out->Close(), file);
}

void read_table(const fs::path& file, std::vector<LabRow>& rows) {
  auto in = check(arrow::io::ReadableFile::Open(file.string()), file);
  auto reader = check(parquet::arrow::OpenFile(in, arrow::default_memory_pool()), file);
  std::shared_ptr<arrow::Table> table = check(reader->ReadTable(), file);
  table = check(table->CombineChunks(), file);
  rows.assign(static_cast<size_t>(table->num_rows()), LabRow{});
  for (const auto& c : columns()) {
    const auto col = table->GetColumnByName(c.name);
    if (!col || col->num_chunks() == 0) continue;
    read_column(c, *col->chunk(0), rows, file);
  }
}

// Errors cross the table as text: lathe::Error, Arrow's exceptions and bad_alloc alike.
template <class F>
std::string guarded(F f) {
  try {
    f();
    return "";
  } catch (const std::exception& e) {
    return e.what()[0] ? e.what() : "unknown error";
  }
}

const DatasetPlugin kTable = {
    plugin_stamp(DatasetPlugin::kAbi),
    [](const std::vector<LabRow>& rows, const std::string& path, const std::string& file) {
      return guarded([&] { write_table(rows, path, file); });
    },
    [](const std::string& file, std::vector<LabRow>& rows) {
      return guarded([&] { read_table(file, rows); });
    },
    [] {
      std::vector<std::string> names;
      for (const auto& c : columns()) names.push_back(c.name);
      return names;
    },
};

}  // namespace
}  // namespace lathe

extern "C" __attribute__((visibility("default"))) const lathe::PluginStamp* lathe_plugin() {
  return &lathe::kTable.stamp;
}
