#include "storage/blob_store.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::storage {
namespace {

namespace fs = std::filesystem;
using ::tailor::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// sha256("hello world")
constexpr char kHelloDigest[] =
    "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9";

class BlobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/tailor_blobs_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl + "/blobs";  // Open must create it
    auto store = BlobStore::Open(root_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
    base_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(base_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(base_, ec);
  }

  std::vector<std::string> TmpEntries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(root_ + "/tmp")) out.push_back(e.path());
    return out;
  }

  // Every regular file below <root>/sha256.
  std::vector<std::string> BlobFiles() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(root_ + "/sha256")) {
      if (e.is_regular_file()) out.push_back(e.path());
    }
    return out;
  }

  std::string base_;
  std::string root_;
  std::unique_ptr<BlobStore> store_;
};

TEST_F(BlobStoreTest, OpenCreatesLayout) {
  EXPECT_TRUE(fs::is_directory(root_ + "/sha256"));
  EXPECT_TRUE(fs::is_directory(root_ + "/tmp"));
  EXPECT_EQ(store_->root(), root_);
}

TEST_F(BlobStoreTest, OpenEmptyRootIsInvalid) {
  EXPECT_THAT(BlobStore::Open(""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("root is empty")));
}

TEST_F(BlobStoreTest, OpenUnderAFileFails) {
  std::ofstream(base_ + "/file") << "x";
  EXPECT_THAT(BlobStore::Open(base_ + "/file/blobs"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("creating blob store root")));
}

TEST_F(BlobStoreTest, PutThenReadSizeExistsPath) {
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo info, store_->Put("hello world"));
  EXPECT_EQ(info.digest, kHelloDigest);
  EXPECT_EQ(info.size_bytes, 11);
  EXPECT_TRUE(store_->Exists(kHelloDigest));
  TAILOR_ASSERT_OK_AND_ASSIGN(int64_t size, store_->Size(kHelloDigest));
  EXPECT_EQ(size, 11);
  TAILOR_ASSERT_OK_AND_ASSIGN(std::string path, store_->PathOf(kHelloDigest));
  EXPECT_EQ(path, root_ + "/sha256/b9/" + std::string(kHelloDigest + 2));
  EXPECT_TRUE(fs::is_regular_file(path));
  TAILOR_ASSERT_OK_AND_ASSIGN(std::string all, store_->ReadAll(kHelloDigest, 1024));
  EXPECT_EQ(all, "hello world");
  TAILOR_EXPECT_OK(store_->Verify(kHelloDigest));
  EXPECT_THAT(TmpEntries(), IsEmpty());
}

TEST_F(BlobStoreTest, EmptyAndBinaryBlobs) {
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo empty, store_->Put(""));
  EXPECT_EQ(empty.digest, Sha256::Hex(""));
  EXPECT_EQ(empty.size_bytes, 0);
  TAILOR_ASSERT_OK_AND_ASSIGN(std::string none, store_->ReadAll(empty.digest, 0));
  EXPECT_EQ(none, "");

  const std::string binary("\0\1\2\0\xff", 5);
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo info, store_->Put(binary));
  TAILOR_ASSERT_OK_AND_ASSIGN(std::string back, store_->ReadAll(info.digest, 5));
  EXPECT_EQ(back, binary);
}

TEST_F(BlobStoreTest, WriterWithCorrectShaCommits) {
  TAILOR_ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(100));
  TAILOR_ASSERT_OK(writer->Append("hello"));
  // The upload is invisible until Commit.
  EXPECT_FALSE(store_->Exists(kHelloDigest));
  EXPECT_EQ(TmpEntries().size(), 1u);
  TAILOR_ASSERT_OK(writer->Append(" "));
  TAILOR_ASSERT_OK(writer->Append(""));
  TAILOR_ASSERT_OK(writer->Append("world"));
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo info, writer->Commit(kHelloDigest, 11));
  EXPECT_EQ(info.digest, kHelloDigest);
  EXPECT_EQ(info.size_bytes, 11);
  EXPECT_TRUE(store_->Exists(kHelloDigest));
  TAILOR_EXPECT_OK(store_->Verify(kHelloDigest));
  EXPECT_THAT(TmpEntries(), IsEmpty());
  // A finished writer refuses further use.
  EXPECT_THAT(writer->Append("x"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already finished")));
  EXPECT_THAT(writer->Commit("", -1),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already finished")));
  writer.reset();
  EXPECT_TRUE(store_->Exists(kHelloDigest));  // destroying after Commit removes nothing
}

TEST_F(BlobStoreTest, WriterWithoutExpectationsCommits) {
  TAILOR_ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(11));
  TAILOR_ASSERT_OK(writer->Append("hello world"));  // exactly max_size is allowed
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo info, writer->Commit("", -1));
  EXPECT_EQ(info.digest, kHelloDigest);
}

TEST_F(BlobStoreTest, WrongShaIsInvalidAndLeavesNothing) {
  const std::string wrong(64, 'a');
  TAILOR_ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(100));
  TAILOR_ASSERT_OK(writer->Append("hello world"));
  EXPECT_THAT(writer->Commit(wrong, 11),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("sha256 mismatch"), HasSubstr("expected " + wrong),
                             HasSubstr(std::string("got ") + kHelloDigest))));
  EXPECT_FALSE(store_->Exists(kHelloDigest));
  EXPECT_FALSE(store_->Exists(wrong));
  EXPECT_THAT(BlobFiles(), IsEmpty());
  EXPECT_THAT(TmpEntries(), IsEmpty());
}

TEST_F(BlobStoreTest, WrongSizeIsInvalidAndLeavesNothing) {
  TAILOR_ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(100));
  TAILOR_ASSERT_OK(writer->Append("hello world"));
  EXPECT_THAT(writer->Commit(kHelloDigest, 12),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("size mismatch"), HasSubstr("expected 12 bytes"),
                             HasSubstr("got 11"))));
  EXPECT_FALSE(store_->Exists(kHelloDigest));
  EXPECT_THAT(TmpEntries(), IsEmpty());
}

TEST_F(BlobStoreTest, OversizeIsResourceExhausted) {
  TAILOR_ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(10));
  TAILOR_ASSERT_OK(writer->Append("hello"));
  EXPECT_THAT(writer->Append(" world"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("maximum size of 10 bytes")));
  // The temp file is gone at once, not only when the writer is destroyed.
  EXPECT_THAT(TmpEntries(), IsEmpty());
  EXPECT_THAT(writer->Commit("", -1),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already finished")));
  EXPECT_THAT(BlobFiles(), IsEmpty());
}

TEST_F(BlobStoreTest, NegativeMaxSizeIsInvalid) {
  EXPECT_THAT(store_->NewWriter(-1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative max_size")));
}

TEST_F(BlobStoreTest, TruncatedUploadLeavesNothing) {
  {
    TAILOR_ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(100));
    TAILOR_ASSERT_OK(writer->Append("hello"));
    EXPECT_EQ(TmpEntries().size(), 1u);
  }  // the client went away before Commit
  EXPECT_THAT(TmpEntries(), IsEmpty());
  EXPECT_THAT(BlobFiles(), IsEmpty());
}

TEST_F(BlobStoreTest, CommittingSameContentTwiceIsFine) {
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo first, store_->Put("hello world"));
  TAILOR_ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(100));
  TAILOR_ASSERT_OK(writer->Append("hello world"));
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo second, writer->Commit(kHelloDigest, 11));
  EXPECT_EQ(first.digest, second.digest);
  EXPECT_EQ(second.size_bytes, 11);
  EXPECT_EQ(BlobFiles().size(), 1u);
  EXPECT_THAT(TmpEntries(), IsEmpty());
  TAILOR_EXPECT_OK(store_->Verify(kHelloDigest));
}

TEST_F(BlobStoreTest, MalformedDigestIsInvalid) {
  const std::vector<std::string> bad = {
      "", "abc", std::string(kHelloDigest).substr(0, 63), std::string(kHelloDigest) + "0",
      "B94D27B9934D3E08A52E52D7DA7DABFAC484EFE37A5380EE9088F7ACE2EFCDE9",
      "../" + std::string(kHelloDigest).substr(3), std::string(64, 'g')};
  for (const std::string& d : bad) {
    SCOPED_TRACE(d);
    EXPECT_FALSE(store_->Exists(d));
    EXPECT_THAT(store_->Size(d),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("malformed blob digest")));
    EXPECT_THAT(store_->PathOf(d),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("malformed blob digest")));
    EXPECT_THAT(store_->ReadChunk(d, 0, 10),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("malformed blob digest")));
    EXPECT_THAT(store_->ReadAll(d, 10),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("malformed blob digest")));
    EXPECT_THAT(store_->Verify(d),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("malformed blob digest")));
  }
}

TEST_F(BlobStoreTest, MissingBlobIsNotFound) {
  EXPECT_FALSE(store_->Exists(kHelloDigest));
  const auto not_found = StatusIs(absl::StatusCode::kNotFound,
                                  HasSubstr(std::string("blob ") + kHelloDigest + " not found"));
  EXPECT_THAT(store_->Size(kHelloDigest), not_found);
  EXPECT_THAT(store_->PathOf(kHelloDigest), not_found);
  EXPECT_THAT(store_->ReadChunk(kHelloDigest, 0, 10), not_found);
  EXPECT_THAT(store_->ReadAll(kHelloDigest, 10), not_found);
  EXPECT_THAT(store_->Verify(kHelloDigest), not_found);
}

TEST_F(BlobStoreTest, ReadChunkRanges) {
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo info, store_->Put("0123456789"));
  const std::string& d = info.digest;
  auto chunk = [&](int64_t off, int64_t max) { return store_->ReadChunk(d, off, max); };
  EXPECT_EQ(*chunk(0, 4), "0123");
  EXPECT_EQ(*chunk(4, 4), "4567");
  EXPECT_EQ(*chunk(8, 4), "89");      // short final chunk
  EXPECT_EQ(*chunk(0, 100), "0123456789");
  EXPECT_EQ(*chunk(3, 0), "");
  EXPECT_EQ(*chunk(10, 4), "");       // offset == size: end of stream, not an error
  EXPECT_THAT(chunk(11, 4), StatusIs(absl::StatusCode::kOutOfRange,
                                     HasSubstr("offset 11 is past the end")));
  EXPECT_THAT(chunk(-1, 4),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative offset")));
  EXPECT_THAT(chunk(0, -4),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_bytes -4")));

  // Reassembling by chunks gives the original.
  std::string joined;
  for (int64_t off = 0; off < info.size_bytes; off += 3) {
    TAILOR_ASSERT_OK_AND_ASSIGN(std::string part, chunk(off, 3));
    joined += part;
  }
  EXPECT_EQ(joined, "0123456789");
}

TEST_F(BlobStoreTest, ReadAllRespectsLimit) {
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo info, store_->Put("0123456789"));
  EXPECT_THAT(store_->ReadAll(info.digest, 9),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("is 10 bytes, more than the limit of 9")));
  TAILOR_ASSERT_OK_AND_ASSIGN(std::string all, store_->ReadAll(info.digest, 10));
  EXPECT_EQ(all, "0123456789");
}

TEST_F(BlobStoreTest, VerifyDetectsTampering) {
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo info, store_->Put("hello world"));
  TAILOR_ASSERT_OK_AND_ASSIGN(std::string path, store_->PathOf(info.digest));
  // Published blobs are read-only; tampering needs to lift that first.
  fs::permissions(path, fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "hello w0rld";
  EXPECT_THAT(store_->Verify(info.digest),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("is corrupt"),
                             HasSubstr(Sha256::Hex("hello w0rld")))));
  // Uploading the same content again replaces the damaged file with a verified copy.
  TAILOR_ASSERT_OK(store_->Put("hello world").status());
  TAILOR_EXPECT_OK(store_->Verify(info.digest));
}

TEST_F(BlobStoreTest, PublishedBlobsAreReadOnly) {
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo info, store_->Put("hello world"));
  TAILOR_ASSERT_OK_AND_ASSIGN(std::string path, store_->PathOf(info.digest));
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
}

TEST_F(BlobStoreTest, LargeBlobStreamsInChunks) {
  std::string data;
  for (int i = 0; i < 3 * (1 << 20) + 17; ++i) data.push_back(static_cast<char>(i * 31));
  TAILOR_ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter(data.size()));
  for (size_t off = 0; off < data.size(); off += 65536) {
    TAILOR_ASSERT_OK(writer->Append(absl::string_view(data).substr(off, 65536)));
  }
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo info,
                              writer->Commit(Sha256::Hex(data), data.size()));
  TAILOR_EXPECT_OK(store_->Verify(info.digest));
  TAILOR_ASSERT_OK_AND_ASSIGN(std::string back, store_->ReadAll(info.digest, data.size()));
  EXPECT_TRUE(back == data);
}

TEST_F(BlobStoreTest, LeftoverTempFilesRemovedAtOpen) {
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo info, store_->Put("hello world"));
  std::ofstream(root_ + "/tmp/upload-crashed") << "partial";
  fs::create_directory(root_ + "/tmp/stray-dir");
  std::ofstream(root_ + "/tmp/stray-dir/f") << "x";
  EXPECT_EQ(TmpEntries().size(), 2u);
  TAILOR_ASSERT_OK_AND_ASSIGN(auto reopened, BlobStore::Open(root_));
  EXPECT_THAT(TmpEntries(), IsEmpty());
  // Published blobs survive.
  EXPECT_TRUE(reopened->Exists(info.digest));
  TAILOR_EXPECT_OK(reopened->Verify(info.digest));
}

TEST_F(BlobStoreTest, WriteErrorCarriesErrnoAndRemovesTempFile) {
  // RLIMIT_FSIZE makes write(2) fail with EFBIG (SIGXFSZ ignored), standing in for a full
  // disk without needing one; ENOSPC would map to RESOURCE_EXHAUSTED the same way.
  struct sigaction ignore = {}, old_action = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &old_action), 0);
  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);

  absl::Status status;
  {
    auto writer = store_->NewWriter(1 << 20);
    ASSERT_TRUE(writer.ok());
    status = (*writer)->Append(std::string(8192, 'x'));
    EXPECT_THAT((*writer)->Commit("", -1),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already finished")));
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  sigaction(SIGXFSZ, &old_action, nullptr);

  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInternal,
                               AllOf(HasSubstr("writing"), HasSubstr("File too large"))));
  EXPECT_THAT(TmpEntries(), IsEmpty());
  EXPECT_THAT(BlobFiles(), IsEmpty());
}

TEST_F(BlobStoreTest, ConcurrentWritersAreIndependent) {
  TAILOR_ASSERT_OK_AND_ASSIGN(auto a, store_->NewWriter(100));
  TAILOR_ASSERT_OK_AND_ASSIGN(auto b, store_->NewWriter(100));
  TAILOR_ASSERT_OK(a->Append("hello "));
  TAILOR_ASSERT_OK(b->Append("other"));
  TAILOR_ASSERT_OK(a->Append("world"));
  EXPECT_EQ(TmpEntries().size(), 2u);
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo ia, a->Commit(kHelloDigest, -1));
  TAILOR_ASSERT_OK_AND_ASSIGN(BlobInfo ib, b->Commit(Sha256::Hex("other"), 5));
  EXPECT_EQ(ia.digest, kHelloDigest);
  EXPECT_NE(ia.digest, ib.digest);
  EXPECT_EQ(BlobFiles().size(), 2u);
}

}  // namespace
}  // namespace tailor::storage
