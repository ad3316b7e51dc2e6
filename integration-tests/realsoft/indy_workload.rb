# A Ruby workload that keeps JRuby's invokedynamic call sites busy: method
# calls of several arities, blocks, string/hash/array work and Integer math.
# Runs for SECONDS (default 15) of wall time, then prints a checksum.
# Run with: jruby -Xcompile.invokedynamic=true indy_workload.rb [SECONDS]

class Vec
  attr_reader :x, :y
  def initialize(x, y)
    @x = x
    @y = y
  end

  def +(other)
    Vec.new(@x + other.x, @y + other.y)
  end
  def dot(other)
    @x * other.x + @y * other.y
  end
  def scale(k)
    Vec.new(@x * k, @y * k)
  end
end

module Shapes
  class Shape
    def area
      0
    end
    def describe(prefix, suffix, sep)
      "#{prefix}#{sep}#{name}#{sep}#{area}#{suffix}"
    end
  end

  class Square < Shape
    def initialize(s)
      @s = s
    end
    def name
      "square"
    end
    def area
      @s * @s
    end
  end

  class Rect < Shape
    def initialize(w, h)
      @w = w
      @h = h
    end
    def name
      "rect"
    end
    def area
      @w * @h
    end
  end

  class Tri < Shape
    def initialize(b, h)
      @b = b
      @h = h
    end
    def name
      "tri"
    end
    def area
      (@b * @h) / 2
    end
  end
end

def fib(n)
  n < 2 ? n : fib(n - 1) + fib(n - 2)
end

def six(a, b, c, d, e, f)
  a + b * c - d + (e ^ f)
end

def collatz(n)
  steps = 0
  while n != 1
    n = n.even? ? n / 2 : 3 * n + 1
    steps += 1
  end
  steps
end

def words_round(i)
  text = "the quick brown fox jumps over the lazy dog #{i} times"
  counts = Hash.new(0)
  text.split(" ").each { |w| counts[w.upcase] += 1 }
  counts.map { |k, v| "#{k}=#{v}" }.sort.join(",").length
end

def shapes_round(i)
  shapes = [Shapes::Square.new(i % 7 + 1), Shapes::Rect.new(i % 5 + 1, 3), Shapes::Tri.new(4, i % 9 + 2)]
  shapes.sum { |s| s.describe("<", ">", ":").size + s.area }
end

def vec_round(i)
  v = Vec.new(1, 2)
  10.times { |k| v = (v + Vec.new(k, i & 3)).scale(1) }
  v.dot(Vec.new(3, 4))
end

def array_round(i)
  a = (1..40).map { |k| (k * 2654435761 + i) % 1000 }
  a.select(&:odd?).map { |k| k * 3 }.each_slice(4).map(&:sum).max +
    a.each_with_object({}) { |k, h| h[k % 13] = (h[k % 13] || 0) + k }.size
end

seconds = (ARGV[0] || "15").to_f
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
checksum = 0
i = 0
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  50.times do
    i += 1
    checksum += fib(12)
    checksum += six(i, 2, 3, 4, i & 255, 7)
    checksum += collatz(i % 1000 + 1)
    checksum += words_round(i)
    checksum += shapes_round(i)
    checksum += vec_round(i)
    checksum += array_round(i)
    checksum &= 0xFFFFFFFF
  end
end
puts "rounds=#{i} checksum=#{checksum}"
