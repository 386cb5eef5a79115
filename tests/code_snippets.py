"""Small, real-looking source files in 16 languages for the code chunker's tests.

Each entry: the language, a file path, the source, and the symbols it must yield as
``(symbol_kind, qualified_name, marker)``; ``marker`` is a substring of the line where
the definition itself starts (its leading comments/decorators may start earlier).
"""

from __future__ import annotations

from typing import NamedTuple


class Snippet(NamedTuple):
    language: str
    path: str
    source: str
    symbols: list[tuple[str, str, str]]


PYTHON = '''\
"""Upload client with retries."""

import time
from dataclasses import dataclass

MAX_RETRIES = 5


@dataclass
class RetryPolicy:
    """How often and how long to retry."""

    attempts: int = 3
    backoff: float = 0.5


class UploadClient:
    """Uploads files to the object store."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy

    # Retries the upload with exponential backoff.
    def retry_upload(self, path: str) -> bool:
        for attempt in range(self.policy.attempts):
            if self._send(path):
                return True
            time.sleep(self.policy.backoff * 2**attempt)
        return False

    @staticmethod
    def _send(path: str) -> bool:
        return path.endswith(".txt")


def main() -> None:
    client = UploadClient(RetryPolicy())
    print(client.retry_upload("a.txt"))


if __name__ == "__main__":
    main()
'''

JAVASCRIPT = """\
// Upload helpers for the browser client.
import { sleep } from "./time.js";

const MAX_RETRIES = 5;

/**
 * Retries an upload with exponential backoff.
 */
export async function retryUpload(send, file) {
  for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
    if (await send(file)) {
      return true;
    }
    await sleep(2 ** attempt * 100);
  }
  return false;
}

const formatSize = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;

class UploadQueue {
  constructor() {
    this.items = [];
  }

  push(file) {
    this.items.push(file);
    return this.items.length;
  }
}

module.exports = { retryUpload, formatSize, UploadQueue };
"""

TYPESCRIPT = """\
import { Readable } from "stream";

export interface UploadOptions {
  retries: number;
  timeoutMs?: number;
}

export type UploadResult = { ok: boolean; bytes: number };

export enum Status {
  Pending,
  Done,
}

export class UploadClient {
  private readonly options: UploadOptions;

  constructor(options: UploadOptions) {
    this.options = options;
  }

  async retryUpload(stream: Readable): Promise<UploadResult> {
    for (let i = 0; i < this.options.retries; i++) {
      const bytes = await this.send(stream);
      if (bytes > 0) {
        return { ok: true, bytes };
      }
    }
    return { ok: false, bytes: 0 };
  }

  private async send(stream: Readable): Promise<number> {
    return stream.readableLength;
  }
}

export const isDone = (status: Status): boolean => status === Status.Done;

namespace Internal {
  export function version(): string {
    return "1.0";
  }
}
"""

TSX = """\
import React, { useState } from "react";

type Props = { files: string[] };

export function UploadList({ files }: Props) {
  const [selected, setSelected] = useState<string | null>(null);
  return (
    <ul>
      {files.map((f) => (
        <li key={f} onClick={() => setSelected(f)}>
          {f === selected ? <b>{f}</b> : f}
        </li>
      ))}
    </ul>
  );
}

export const UploadButton = ({ onClick }: { onClick: () => void }) => (
  <button onClick={onClick}>Upload</button>
);

export default UploadList;
"""

GO = """\
// Package upload sends files with retries.
package upload

import (
	"errors"
	"time"
)

// ErrGiveUp is returned after the last attempt.
var ErrGiveUp = errors.New("upload: giving up")

// Client uploads files.
type Client struct {
	Retries int
	Backoff time.Duration
}

// Sender sends one file.
type Sender interface {
	Send(path string) error
}

// RetryUpload retries the upload with exponential backoff.
func (c *Client) RetryUpload(s Sender, path string) error {
	for i := 0; i < c.Retries; i++ {
		if err := s.Send(path); err == nil {
			return nil
		}
		time.Sleep(c.Backoff << i)
	}
	return ErrGiveUp
}

// NewClient makes a client with defaults.
func NewClient() *Client {
	return &Client{Retries: 3, Backoff: time.Second}
}
"""

RUST = """\
//! Upload client with retries.
use std::thread::sleep;
use std::time::Duration;

/// How often to retry.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub backoff: Duration,
}

pub trait Sender {
    fn send(&self, path: &str) -> bool;
}

pub enum Outcome {
    Sent,
    GaveUp,
}

impl RetryPolicy {
    /// Retries the upload with exponential backoff.
    pub fn retry_upload(&self, sender: &dyn Sender, path: &str) -> Outcome {
        for attempt in 0..self.attempts {
            if sender.send(path) {
                return Outcome::Sent;
            }
            sleep(self.backoff * 2u32.pow(attempt));
        }
        Outcome::GaveUp
    }
}

mod tests {
    fn helper() -> u32 {
        3
    }
}

fn main() {
    println!("upload");
}
"""

JAVA = """\
package com.example.upload;

import java.io.IOException;
import java.time.Duration;

/** Uploads files with retries. */
public class UploadClient {
    private final int retries;

    public UploadClient(int retries) {
        this.retries = retries;
    }

    /** Retries the upload with exponential backoff. */
    @Deprecated
    public boolean retryUpload(String path) throws InterruptedException {
        for (int i = 0; i < retries; i++) {
            if (send(path)) {
                return true;
            }
            Thread.sleep(Duration.ofMillis(100L << i).toMillis());
        }
        return false;
    }

    private boolean send(String path) {
        return path.endsWith(".txt");
    }

    interface Listener {
        void onDone(String path);
    }

    enum State { IDLE, BUSY }
}
"""

KOTLIN = """\
package com.example.upload

import kotlinx.coroutines.delay

data class RetryPolicy(val attempts: Int = 3, val backoffMs: Long = 100)

interface Sender {
    fun send(path: String): Boolean
}

class UploadClient(private val policy: RetryPolicy) {
    // Retries the upload with exponential backoff.
    suspend fun retryUpload(sender: Sender, path: String): Boolean {
        repeat(policy.attempts) { attempt ->
            if (sender.send(path)) return true
            delay(policy.backoffMs shl attempt)
        }
        return false
    }

    companion object {
        fun default() = UploadClient(RetryPolicy())
    }
}

object Registry {
    val clients = mutableListOf<UploadClient>()
}

fun main() {
    println(UploadClient.default())
}
"""

C = """\
#include <stdio.h>
#include <unistd.h>

#define MAX_RETRIES 5

struct upload_client {
    int retries;
    int backoff_ms;
};

typedef int (*send_fn)(const char *path);

/* Retries the upload with exponential backoff. */
int retry_upload(struct upload_client *c, send_fn send, const char *path)
{
    for (int i = 0; i < c->retries; i++) {
        if (send(path) == 0) {
            return 0;
        }
        usleep((c->backoff_ms << i) * 1000);
    }
    return -1;
}

enum outcome { SENT, GAVE_UP };

int main(void)
{
    printf("upload\\n");
    return 0;
}
"""

CPP = """\
#include <string>
#include <chrono>

namespace upload {

class UploadClient {
public:
    explicit UploadClient(int retries) : retries_(retries) {}

    bool retryUpload(const std::string& path);

private:
    bool send(const std::string& path) const {
        return path.size() > 0;
    }

    int retries_;
};

// Retries the upload with exponential backoff.
bool UploadClient::retryUpload(const std::string& path) {
    for (int i = 0; i < retries_; ++i) {
        if (send(path)) {
            return true;
        }
    }
    return false;
}

struct Stats {
    int sent = 0;
};

template <typename T>
T clamp(T v, T lo, T hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

}  // namespace upload
"""

CSHARP = """\
using System;
using System.Threading.Tasks;

namespace Example.Upload
{
    public interface ISender
    {
        bool Send(string path);
    }

    /// <summary>Uploads files with retries.</summary>
    public class UploadClient
    {
        private readonly int _retries;

        public UploadClient(int retries)
        {
            _retries = retries;
        }

        /// <summary>Retries the upload with exponential backoff.</summary>
        [Obsolete("use RetryUploadAsync")]
        public async Task<bool> RetryUpload(ISender sender, string path)
        {
            for (var i = 0; i < _retries; i++)
            {
                if (sender.Send(path)) return true;
                await Task.Delay(100 << i);
            }
            return false;
        }

        public int Retries => _retries;
    }

    public enum Outcome { Sent, GaveUp }

    public struct Stats
    {
        public int Sent;
    }
}
"""

RUBY = """\
# frozen_string_literal: true

require "net/http"

module Upload
  MAX_RETRIES = 5

  # Uploads files with retries.
  class Client
    attr_reader :retries

    def initialize(retries = 3)
      @retries = retries
    end

    # Retries the upload with exponential backoff.
    def retry_upload(path)
      retries.times do |attempt|
        return true if send_file(path)

        sleep(0.1 * (2**attempt))
      end
      false
    end

    def self.default
      new(MAX_RETRIES)
    end
  end
end

def main
  puts Upload::Client.default.retry_upload("a.txt")
end
"""

PHP = """\
<?php

namespace App\\Upload;

use Psr\\Log\\LoggerInterface;

interface Sender
{
    public function send(string $path): bool;
}

trait Retries
{
    protected int $retries = 3;
}

/**
 * Uploads files with retries.
 */
class UploadClient
{
    use Retries;

    public function __construct(private LoggerInterface $log)
    {
    }

    // Retries the upload with exponential backoff.
    public function retryUpload(Sender $sender, string $path): bool
    {
        for ($i = 0; $i < $this->retries; $i++) {
            if ($sender->send($path)) {
                return true;
            }
            usleep(100000 << $i);
        }
        return false;
    }
}

function format_size(int $bytes): string
{
    return sprintf("%.1f KiB", $bytes / 1024);
}
"""

SWIFT = """\
import Foundation

protocol Sender {
    func send(_ path: String) -> Bool
}

struct RetryPolicy {
    var attempts = 3
    var backoff: TimeInterval = 0.1
}

/// Uploads files with retries.
final class UploadClient {
    let policy: RetryPolicy

    init(policy: RetryPolicy) {
        self.policy = policy
    }

    /// Retries the upload with exponential backoff.
    func retryUpload(_ sender: Sender, path: String) -> Bool {
        for attempt in 0..<policy.attempts {
            if sender.send(path) {
                return true
            }
            Thread.sleep(forTimeInterval: policy.backoff * pow(2, Double(attempt)))
        }
        return false
    }
}

enum Outcome {
    case sent
    case gaveUp
}

extension UploadClient {
    func describe() -> String { "UploadClient" }
}

func formatSize(_ bytes: Int) -> String {
    return String(format: "%.1f KiB", Double(bytes) / 1024)
}
"""

SCALA = """\
package example.upload

import scala.concurrent.duration._

trait Sender {
  def send(path: String): Boolean
}

case class RetryPolicy(attempts: Int = 3, backoff: FiniteDuration = 100.millis)

class UploadClient(policy: RetryPolicy) {
  // Retries the upload with exponential backoff.
  def retryUpload(sender: Sender, path: String): Boolean = {
    var attempt = 0
    while (attempt < policy.attempts) {
      if (sender.send(path)) return true
      Thread.sleep(policy.backoff.toMillis << attempt)
      attempt += 1
    }
    false
  }
}

object UploadClient {
  val Default = new UploadClient(RetryPolicy())

  def main(args: Array[String]): Unit = {
    println(Default)
  }
}
"""

BASH = """\
#!/usr/bin/env bash
# Uploads files with retries.
set -euo pipefail

MAX_RETRIES=5

log() {
  echo "[$(date +%T)] $*" >&2
}

# Retries the upload with exponential backoff.
retry_upload() {
  local path="$1"
  for ((attempt = 0; attempt < MAX_RETRIES; attempt++)); do
    if curl -fsS -T "$path" "$UPLOAD_URL"; then
      return 0
    fi
    sleep $((2 ** attempt))
  done
  log "giving up on $path"
  return 1
}

function main {
  retry_upload "$@"
}

main "$@"
"""

SNIPPETS: list[Snippet] = [
    Snippet(
        "python",
        "upload/client.py",
        PYTHON,
        [
            ("class", "RetryPolicy", "class RetryPolicy"),
            ("class", "UploadClient", "class UploadClient"),
            ("method", "UploadClient.__init__", "def __init__"),
            ("method", "UploadClient.retry_upload", "def retry_upload"),
            ("method", "UploadClient._send", "def _send"),
            ("function", "main", "def main"),
        ],
    ),
    Snippet(
        "javascript",
        "web/upload.js",
        JAVASCRIPT,
        [
            ("function", "retryUpload", "export async function retryUpload"),
            ("function", "formatSize", "const formatSize"),
            ("class", "UploadQueue", "class UploadQueue"),
            ("method", "UploadQueue.constructor", "constructor()"),
            ("method", "UploadQueue.push", "push(file)"),
        ],
    ),
    Snippet(
        "typescript",
        "src/upload.ts",
        TYPESCRIPT,
        [
            ("interface", "UploadOptions", "export interface UploadOptions"),
            ("type", "UploadResult", "export type UploadResult"),
            ("enum", "Status", "export enum Status"),
            ("class", "UploadClient", "export class UploadClient"),
            ("method", "UploadClient.constructor", "constructor(options"),
            ("method", "UploadClient.retryUpload", "async retryUpload"),
            ("method", "UploadClient.send", "private async send"),
            ("function", "isDone", "export const isDone"),
            ("namespace", "Internal", "namespace Internal"),
            ("function", "Internal.version", "export function version"),
        ],
    ),
    Snippet(
        "tsx",
        "src/UploadList.tsx",
        TSX,
        [
            ("type", "Props", "type Props"),
            ("function", "UploadList", "export function UploadList"),
            ("function", "UploadButton", "export const UploadButton"),
        ],
    ),
    Snippet(
        "go",
        "upload/client.go",
        GO,
        [
            ("struct", "Client", "type Client struct"),
            ("interface", "Sender", "type Sender interface"),
            ("method", "Client.RetryUpload", "func (c *Client) RetryUpload"),
            ("function", "NewClient", "func NewClient"),
        ],
    ),
    Snippet(
        "rust",
        "src/upload.rs",
        RUST,
        [
            ("struct", "RetryPolicy", "pub struct RetryPolicy"),
            ("trait", "Sender", "pub trait Sender"),
            ("enum", "Outcome", "pub enum Outcome"),
            ("impl", "RetryPolicy", "impl RetryPolicy"),
            ("method", "RetryPolicy.retry_upload", "pub fn retry_upload"),
            ("module", "tests", "mod tests"),
            ("function", "tests.helper", "fn helper"),
            ("function", "main", "fn main"),
        ],
    ),
    Snippet(
        "java",
        "src/main/java/com/example/upload/UploadClient.java",
        JAVA,
        [
            ("class", "UploadClient", "public class UploadClient"),
            ("constructor", "UploadClient.UploadClient", "public UploadClient(int"),
            ("method", "UploadClient.retryUpload", "public boolean retryUpload"),
            ("method", "UploadClient.send", "private boolean send"),
            ("interface", "UploadClient.Listener", "interface Listener"),
            ("enum", "UploadClient.State", "enum State"),
        ],
    ),
    Snippet(
        "kotlin",
        "src/main/kotlin/UploadClient.kt",
        KOTLIN,
        [
            ("class", "RetryPolicy", "data class RetryPolicy"),
            ("interface", "Sender", "interface Sender"),
            ("class", "UploadClient", "class UploadClient"),
            ("method", "UploadClient.retryUpload", "suspend fun retryUpload"),
            ("object", "Registry", "object Registry"),
            ("function", "main", "fun main"),
        ],
    ),
    Snippet(
        "c",
        "src/upload.c",
        C,
        [
            ("struct", "upload_client", "struct upload_client {"),
            ("function", "retry_upload", "int retry_upload"),
            ("enum", "outcome", "enum outcome"),
            ("function", "main", "int main"),
        ],
    ),
    Snippet(
        "cpp",
        "src/upload.cpp",
        CPP,
        [
            ("namespace", "upload", "namespace upload"),
            ("class", "upload.UploadClient", "class UploadClient"),
            ("method", "upload.UploadClient.retryUpload", "bool UploadClient::retryUpload"),
            ("struct", "upload.Stats", "struct Stats"),
            ("function", "upload.clamp", "template <typename T>"),
        ],
    ),
    Snippet(
        "csharp",
        "src/UploadClient.cs",
        CSHARP,
        [
            ("namespace", "Example.Upload", "namespace Example.Upload"),
            ("interface", "Example.Upload.ISender", "public interface ISender"),
            ("class", "Example.Upload.UploadClient", "public class UploadClient"),
            ("method", "Example.Upload.UploadClient.RetryUpload", "public async Task<bool>"),
            ("enum", "Example.Upload.Outcome", "public enum Outcome"),
            ("struct", "Example.Upload.Stats", "public struct Stats"),
        ],
    ),
    Snippet(
        "ruby",
        "lib/upload/client.rb",
        RUBY,
        [
            ("module", "Upload", "module Upload"),
            ("class", "Upload.Client", "class Client"),
            ("method", "Upload.Client.retry_upload", "def retry_upload"),
            ("method", "Upload.Client.default", "def self.default"),
            ("function", "main", "def main"),
        ],
    ),
    Snippet(
        "php",
        "src/Upload/UploadClient.php",
        PHP,
        [
            ("interface", "App.Upload.Sender", "interface Sender"),
            ("trait", "App.Upload.Retries", "trait Retries"),
            ("class", "App.Upload.UploadClient", "class UploadClient"),
            ("method", "App.Upload.UploadClient.retryUpload", "public function retryUpload"),
            ("function", "App.Upload.format_size", "function format_size"),
        ],
    ),
    Snippet(
        "swift",
        "Sources/Upload/UploadClient.swift",
        SWIFT,
        [
            ("protocol", "Sender", "protocol Sender"),
            ("struct", "RetryPolicy", "struct RetryPolicy"),
            ("class", "UploadClient", "final class UploadClient"),
            ("method", "UploadClient.retryUpload", "func retryUpload"),
            ("enum", "Outcome", "enum Outcome"),
            ("extension", "UploadClient", "extension UploadClient"),
            ("function", "formatSize", "func formatSize"),
        ],
    ),
    Snippet(
        "scala",
        "src/main/scala/UploadClient.scala",
        SCALA,
        [
            ("trait", "Sender", "trait Sender"),
            ("class", "RetryPolicy", "case class RetryPolicy"),
            ("class", "UploadClient", "class UploadClient"),
            ("method", "UploadClient.retryUpload", "def retryUpload"),
            ("object", "UploadClient", "object UploadClient"),
        ],
    ),
    Snippet(
        "bash",
        "bin/upload.sh",
        BASH,
        [
            ("function", "log", "log() {"),
            ("function", "retry_upload", "retry_upload() {"),
            ("function", "main", "function main"),
        ],
    ),
]
